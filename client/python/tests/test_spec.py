"""The SDK against the API's documents: every operation of apiserver/openapi.yaml has a method in
both clients, every documented property of a response shape a field, and every channel and server
message of apiserver/asyncapi.yaml is handled by the feed. So the SDK cannot fall behind unnoticed."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any

import pytest
import yaml

import pmx
from pmx import _core, feed, models
from pmxdev import REPO

OPENAPI = yaml.safe_load((REPO / "apiserver" / "openapi.yaml").read_text())
ASYNCAPI = yaml.safe_load((REPO / "apiserver" / "asyncapi.yaml").read_text())
METHODS = {"get", "post", "put", "patch", "delete"}


def operations() -> list[tuple[str, str, str]]:
    return sorted((m.upper(), path, op["operationId"]) for path, item in OPENAPI["paths"].items()
                  for m, op in item.items() if m in METHODS)


def snake(name: str) -> str:
    return "".join("_" + ch.lower() if ch.isupper() else ch for ch in name)


@pytest.mark.parametrize("method,path,operation_id", operations())
def test_every_operation_has_a_method_in_both_clients(method: str, path: str, operation_id: str) -> None:
    ep = _core.ENDPOINTS.get((method, path))
    assert ep is not None, f"{method} {path} ({operation_id}) has no builder in pmx._core: add one with @endpoint"
    name = ep.build.__name__
    assert name == snake(operation_id), f"{method} {path}: the method is {name}, the operation {operation_id}"
    for cls in (pmx.Client, pmx.AsyncClient):
        m = getattr(cls, name, None)
        assert m is not None and _core.endpoint_of(m) is ep.build, f"{cls.__name__} has no method {name} for {method} {path}"
    assert inspect.iscoroutinefunction(getattr(pmx.AsyncClient, name)) or _awaits(getattr(pmx.AsyncClient, name))


def _awaits(m: Any) -> bool:
    return "Awaitable" in str(inspect.signature(m).return_annotation)


def test_no_method_for_an_operation_that_is_gone() -> None:
    documented = {(m, p) for m, p, _ in operations()}
    assert set(_core.ENDPOINTS) <= documented, set(_core.ENDPOINTS) - documented


# Each response shape of the OpenAPI document and the dataclass that holds it.
SHAPES = {
    "Market": models.Market, "Level": models.Level, "OrderBook": models.OrderBook, "Order": models.Order,
    "Trade": models.Trade, "Position": models.Position, "Fill": models.Fill, "Settlement": models.Settlement,
    "Candle": models.Candle, "Account": models.Account, "RateLimit": models.RateLimit, "WsToken": models.WsToken,
    "Heartbeat": models.HeartbeatState, "MarketEvent": models.MarketEvent, "AccountEvent": models.AccountEvent,
    "ApiKey": models.ApiKey, "NewKey": models.NewKey, "RiskLimits": models.RiskLimits, "OrderGroup": models.OrderGroup,
    "Event": models.Event, "EventOutcome": models.EventOutcome, "EventDetail": models.EventDetail,
    "OutcomeDetail": models.OutcomeDetail, "Conversion": models.Conversion,
    "Series": models.Series, "SeriesInstance": models.SeriesInstance,
    "Fees": models.Fees, "AccountFees": models.AccountFees, "PlacedTrade": models.PlacedTrade,
}


def schema_of(name: str) -> dict[str, Any]:
    """A component schema's properties and required names, its allOf parts (a $ref to another
    component, or an inline object) merged as one object."""
    doc = OPENAPI["components"]["schemas"][name]
    properties = dict(doc.get("properties", {}))
    required = list(doc.get("required", []))
    for part in doc.get("allOf", []):
        if "$ref" in part:
            part = schema_of(part["$ref"].rsplit("/", 1)[1])
        properties.update(part.get("properties", {}))
        required += part.get("required", [])
    return {"properties": properties, "required": required}


def json_fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    out = {}
    for f in dataclasses.fields(cls):
        name = f.metadata.get("json", models._camel(f.name))
        if name is not None:
            out[name] = f
    return out


@pytest.mark.parametrize("schema", sorted(SHAPES))
def test_every_documented_property_is_a_field(schema: str) -> None:
    doc = schema_of(schema)
    fields = json_fields(SHAPES[schema])
    missing = set(doc["properties"]) - set(fields)
    assert not missing, f"{schema}: the SDK's {SHAPES[schema].__name__} lacks {sorted(missing)}"
    for name in doc.get("required", []):
        f = fields[name]
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, \
            f"{schema}.{name} is required by the API: the SDK should require it too"


def test_every_response_object_is_read_whole() -> None:
    # The inline response objects: their properties against the dataclass fields.
    inline = {
        ("/markets", "get"): models.MarketPage, ("/market/order-book", "get"): models.OrderBookSnapshot,
        ("/market/events", "get"): models.MarketEventPage, ("/account/events", "get"): models.AccountEventPage,
        ("/orders", "get"): models.OrderPage, ("/settlements", "get"): models.SettlementPage,
        ("/fills", "get"): models.FillPage, ("/market/candles", "get"): models.Candles,
        ("/account/limits", "get"): models.AccountLimits, ("/events", "get"): models.EventPage,
        ("/series", "get"): models.SeriesPage,
    }
    for (path, method), cls in inline.items():
        responses = OPENAPI["paths"][path][method]["responses"]
        schema = responses["200"]["content"]["application/json"]["schema"]
        missing = set(schema["properties"]) - set(json_fields(cls))
        assert not missing, f"{method.upper()} {path}: {cls.__name__} lacks {sorted(missing)}"


def test_the_feed_knows_every_channel_and_message() -> None:
    schemas = ASYNCAPI["components"]["schemas"]
    assert set(schemas["Channel"]["enum"]) == set(models.Channel.__args__)  # type: ignore[attr-defined]
    assert set(schemas["Subscribe"]["properties"]) == {"op", "id", "channel", "marketId", "resumeFrom"}
    handled = set(inspect.getsource(feed.AsyncFeed._handle).split('"'))
    for ref in ASYNCAPI["operations"]["serverMessages"]["messages"]:
        name = ref["$ref"].rsplit("/", 1)[1]
        payload = ASYNCAPI["components"]["messages"][name]["payload"]["$ref"].rsplit("/", 1)[1]
        typ = schemas[payload]["properties"]["type"]
        types = typ.get("enum") or [typ["const"]]
        for t in types:
            assert t in handled, f"the feed does not handle the server message {t!r} ({name})"
    # Every property of the feed's data messages is a field of the SDK's message.
    for payload, cls in {"Snapshot": feed.BookSnapshot, "Ticker": feed.Ticker, "Market": feed.MarketChange,
                         "Event": models.MarketEvent, "AccountEvent": models.AccountEvent}.items():
        missing = set(schemas[payload]["properties"]) - set(json_fields(cls)) - {"type", "channel"}
        assert not missing, f"{payload}: {cls.__name__} lacks {sorted(missing)}"


def test_fees_decode_as_documented() -> None:
    # A placement's trades are PlacedTrades (a Trade and its fee).
    items = schema_of("PlacedOrder")["properties"]["trades"]["items"]["$ref"].rsplit("/", 1)[1]
    assert SHAPES[items] is models.PlacedTrade
    assert typing.get_type_hints(models.PlacedOrder)["trades"] == list[models.PlacedTrade]
    # A market always has its schedule (both 0: none); an event without one has None.
    market = {"id": "m", "url": None, "question": "q", "description": None, "category": "c", "status": "OPEN",
              "closesAt": None, "resolvesAt": None, "resolved": False, "outcome": None, "labelA": "Yes",
              "labelB": "No", "createdAt": "2030-05-01T12:00:00Z", "updatedAt": "2030-05-01T12:00:00Z"}
    with pytest.raises(pmx.ProtocolError, match="'fees'"):
        models.decode(models.Market, market)
    got = models.decode(models.Market, {**market, "fees": {"takerBps": 700, "makerBps": -175}})
    assert (got.fees.taker_bps, got.fees.maker_bps) == (700, -175)
    event = {"id": "e", "name": "n", "question": "q", "category": "c", "status": "OPEN",
             "createdAt": "2030-05-01T12:00:00Z", "outcomes": []}
    assert models.decode(models.Event, event).fees is None
    assert models.decode(models.Event, {**event, "fees": {"takerBps": 1, "makerBps": 0}}).fees == models.Fees(1, 0)
    # Optional: a fill event of the account feed recorded before fees existed has none, read as 0.
    fill = {"id": "f", "tradeId": "t", "orderId": "o", "clientOrderId": None, "marketId": "m", "side": "BUY",
            "outcome": "YES", "price": 40, "quantity": 1, "role": "MAKER", "createdAt": "2030-05-01T12:00:00Z"}
    assert models.decode(models.Fill, {**fill, "fee": -3}).fee == -3
    assert models.decode(models.Fill, fill).fee == 0
    fees = models.decode(models.AccountFees, {"since": "2030-05-01T00:00:00Z", "until": "2030-05-31T00:00:00.123456789Z",
                                              "paid": 12, "rebates": 3, "net": 9, "fills": 4})
    assert (fees.paid, fees.rebates, fees.net, fees.fills, fees.until.microsecond) == (12, 3, 9, 4, 123456)
