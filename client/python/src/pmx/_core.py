"""What the sync and the async client share: every endpoint, the retry policy, the answers.

Each endpoint of the API is one function here that builds a :class:`Call` (method, path, query,
body, how to read the answer, whether it is safe to send again) without doing any I/O. The two
clients (:mod:`pmx.client`, :mod:`pmx.aio`) only carry calls over HTTP, one with ``httpx.Client``
and one with ``httpx.AsyncClient``, and ask their :class:`Session` what each attempt's outcome
means: a result, an error to raise, or a wait before the next attempt (:class:`RetryPolicy`).
:data:`ENDPOINTS` lists every endpoint by ``(method, path)``; a test checks it against the
OpenAPI document, so the SDK cannot fall behind the API unnoticed.
"""

from __future__ import annotations

import datetime as _dt
import functools
import inspect
import json
import random
import re
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Optional, Sequence, TypeVar, Union

import httpx

from . import errors, signing
from .models import (
    AUTO, Account, AccountEventPage, AccountFees, AccountLimits, ApiKey, Auto, BatchResult, CancelFailure, CancelResult,
    CandleInterval, Candles, Conversion, EventDetail, EventPage, FillPage, HeartbeatState, Market,
    SeriesDetail, SeriesPage,
    KeyScope, MarketEventPage, MarketPage,
    MarketStatus, NewKey, Order, OrderBookSnapshot, OrderPage, OrderRequest, OrderStatus, Outcome,
    OrderGroup, OrderGroupPage, PlacedOrder, Position, QueuePosition, QueuePositionFailure, QueuePositions, RiskLimits, SelfTradePrevention, SettlementPage, Side, TimeInForce, Trade, WsToken,
    decode, format_time,
)

T = TypeVar("T")

#: Reads a success answer (its status, its body as parsed JSON or None when empty, its headers)
#: into the call's result; a status the API does not document for the call is a ProtocolError.
Parser = Callable[[int, Any, Mapping[str, str]], T]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API, ready to send, and how to read its answer."""

    method: str
    path: str  # below /api/v1
    parse: Parser[T]
    params: Optional[dict[str, str]] = None
    body: Any = None
    has_body: bool = False
    #: True when sending it again after it may have reached the exchange changes nothing more:
    #: reads, the heartbeat, and placements whose every order has a client order id.
    resend_safe: bool = False


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    build: Callable[..., Call[Any]]


#: Every endpoint of the API, by (method, path below /api/v1).
ENDPOINTS: dict[tuple[str, str], Endpoint] = {}

F = TypeVar("F", bound=Callable[..., Call[Any]])


def endpoint(method: str, path: str) -> Callable[[F], F]:
    """Registers a call builder as the SDK's method for ``method path``."""

    # A path parameter ({id}) stands for one segment of the path built.
    pattern = re.compile("".join("[^/]+" if part.startswith("{") else re.escape(part)
                                 for part in re.split(r"(\{[^}]+\})", path)) + "$")

    def register(build: F) -> F:
        @functools.wraps(build)
        def checked(*args: Any, **kwargs: Any) -> Call[Any]:
            call = build(*args, **kwargs)
            assert call.method == method and pattern.match(call.path), f"{build.__name__} builds {call.method} {call.path}"
            return call

        key = (method, path)
        if key in ENDPOINTS:
            raise RuntimeError(f"two builders for {method} {path}")
        ENDPOINTS[key] = Endpoint(method, path, checked)
        return checked  # type: ignore[return-value]

    return register


# --- Answers --------------------------------------------------------------------------------


def _one(cls: type[T], *ok: int) -> Parser[T]:
    def parse(status: int, body: Any, headers: Mapping[str, str]) -> T:
        _expect(status, ok)
        return decode(cls, body)

    return parse


def _list_of(cls: type[T], key: Optional[str], *ok: int) -> Parser[list[T]]:
    def parse(status: int, body: Any, headers: Mapping[str, str]) -> list[T]:
        _expect(status, ok)
        items = body[key] if key is not None and isinstance(body, dict) and key in body else body
        if body is None and key is None:
            items = []  # the contract: an empty body is an empty array
        if not isinstance(items, list):
            raise errors.ProtocolError(f"expected an array{' in ' + repr(key) if key else ''}, got {type(items).__name__}")
        return [decode(cls, item, f"$[{i}]") for i, item in enumerate(items)]

    return parse


def _nothing(*ok: int) -> Parser[None]:
    def parse(status: int, body: Any, headers: Mapping[str, str]) -> None:
        _expect(status, ok)

    return parse


def _expect(status: int, ok: Sequence[int]) -> None:
    if status not in ok:
        raise errors.ProtocolError(f"the exchange answered HTTP {status}, where the API documents {list(ok)}")


def _placed(status: int, body: Any, headers: Mapping[str, str]) -> PlacedOrder:
    # 201: placed, with its trades. 200: a replay of the same client order id: the Order as it
    # stands, without trades (the header says so; pmx sends 200 for nothing else here).
    _expect(status, (200, 201))
    if status == 200:
        return decode(PlacedOrder, {**body, "trades": []} if isinstance(body, dict) else body, replayed=True)
    return decode(PlacedOrder, body)


def _converted(status: int, body: Any, headers: Mapping[str, str]) -> Conversion:
    # 201: converted. 200: a repeat of the same client request id, answered by the conversion
    # already made (pmx sends 200 for nothing else here).
    _expect(status, (200, 201))
    return decode(Conversion, body, replayed=status == 200)


def _amended(status: int, body: Any, headers: Mapping[str, str]) -> PlacedOrder:
    _expect(status, (200,))
    return decode(PlacedOrder, body)


def _batch(status: int, body: Any, headers: Mapping[str, str]) -> list[BatchResult]:
    _expect(status, (201,))
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise errors.ProtocolError("the batch's answer has no 'results' array")
    out = []
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("status"), int):
            raise errors.ProtocolError(f"$.results[{i}] has no integer 'status'")
        st = r["status"]
        if st in (200, 201):
            out.append(BatchResult(st, _placed(st, r.get("order"), headers)))
        else:
            out.append(BatchResult(st, None, errors.error_from_response(st, r, {})))
    return out


def _cancelled_many(status: int, body: Any, headers: Mapping[str, str]) -> CancelResult:
    _expect(status, (200,))
    if not isinstance(body, dict):
        raise errors.ProtocolError("the answer to POST /orders/cancel is not an object")
    cancelled = _list_of(Order, "cancelled", 200)(status, body, headers)
    failures = []
    for i, e in enumerate(body.get("errors") or []):
        if not isinstance(e, dict) or not isinstance(e.get("orderId"), str):
            raise errors.ProtocolError(f"$.errors[{i}] has no 'orderId'")
        failures.append(CancelFailure(e["orderId"], errors.error_from_response(_status_of(e), e, {})))
    return CancelResult(cancelled, failures)


def _queue_positions(status: int, body: Any, headers: Mapping[str, str]) -> QueuePositions:
    _expect(status, (200,))
    if not isinstance(body, dict):
        raise errors.ProtocolError("the answer to GET /orders/queue-positions is not an object")
    positions = _list_of(QueuePosition, "positions", 200)(status, body, headers)
    failures = []
    for i, e in enumerate(body.get("errors") or []):
        if not isinstance(e, dict) or not isinstance(e.get("orderId"), str):
            raise errors.ProtocolError(f"$.errors[{i}] has no 'orderId'")
        code = (e.get("details") or {}).get("code")
        # As GET /order/queue-position would have answered each.
        st = {"not_your_order": 403, "order_not_found": 404, "order_not_open": 409, "unavailable": 503}.get(str(code), 400)
        failures.append(QueuePositionFailure(e["orderId"], errors.error_from_response(st, e, {})))
    return QueuePositions(positions, failures)


def _status_of(err: Mapping[str, Any]) -> int:
    # The refusals of a bulk cancel carry no status; give each the one POST /cancel-order would.
    code = (err.get("details") or {}).get("code")
    return {"not_your_order": 403, "order_not_found": 404}.get(str(code), 400)


# --- Query and body helpers -----------------------------------------------------------------


def _query(**params: Any) -> Optional[dict[str, str]]:
    out = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, _dt.datetime):
            value = format_time(value)
        out[name] = str(value)
    return out or None


def _object(**fields: Any) -> dict[str, Any]:
    """A JSON body of the fields that are not None (date-times as RFC 3339)."""
    return {k: format_time(v) if isinstance(v, _dt.datetime) else v for k, v in fields.items() if v is not None}


def new_client_order_id() -> str:
    """A fresh client order id: 32 hex digits, within the API's ``[A-Za-z0-9._:-]{1,64}``."""
    return "py-" + uuid.uuid4().hex


def _client_order_id(value: Union[str, None, Auto]) -> Optional[str]:
    return new_client_order_id() if isinstance(value, Auto) else value


def _order_body(o: OrderRequest) -> dict[str, Any]:
    return _object(marketId=o.market_id, side=o.side, outcome=o.outcome, price=o.price, quantity=o.quantity,
                   timeInForce=o.time_in_force, expiresAt=o.expires_at, postOnly=o.post_only,
                   clientOrderId=_client_order_id(o.client_order_id), selfTradePrevention=o.self_trade_prevention,
                   orderGroupId=o.order_group_id)


def _order_ref(order_id: Optional[str], client_order_id: Optional[str]) -> dict[str, Any]:
    if (order_id is None) == (client_order_id is None):
        raise ValueError("name the order by order_id or by client_order_id (one of the two)")
    return _object(orderId=order_id, clientOrderId=client_order_id)


# --- Endpoints: markets ---------------------------------------------------------------------


@endpoint("GET", "/markets")
def list_markets(*, status: Optional[MarketStatus] = None, limit: Optional[int] = None,
                 cursor: Optional[str] = None) -> Call[MarketPage]:
    """Markets, newest first, optionally of one status. Without ``limit`` or ``cursor``, all of
    them at once; with either, a page (``next_cursor`` continues it)."""
    return Call("GET", "/markets", _one(MarketPage, 200), _query(status=status, limit=limit, cursor=cursor),
                resend_safe=True)


@endpoint("GET", "/market")
def get_market(market_id: str) -> Call[Market]:
    """One market (``NotFoundError`` if there is none with this id)."""
    return Call("GET", "/market", _one(Market, 201), _query(marketId=market_id), resend_safe=True)


@endpoint("GET", "/market/order-book")
def get_order_book(market_id: str) -> Call[OrderBookSnapshot]:
    """The market's book in its YES and NO views (best 10 levels a side) and the ``seq`` it reflects."""
    return Call("GET", "/market/order-book", _one(OrderBookSnapshot, 200), _query(marketId=market_id),
                resend_safe=True)


@endpoint("GET", "/market/trades")
def list_market_trades(market_id: str, *, limit: Optional[int] = None) -> Call[list[Trade]]:
    """The market's recent trades, newest first (50 by default, ``limit`` up to 500)."""
    return Call("GET", "/market/trades", _list_of(Trade, None, 200), _query(marketId=market_id, limit=limit),
                resend_safe=True)


@endpoint("GET", "/market/events")
def get_market_events(market_id: str, *, after: Optional[int] = None,
                      limit: Optional[int] = None) -> Call[MarketEventPage]:
    """The market's feed events after ``after``, oldest first (``ResyncRequiredError`` past retention)."""
    return Call("GET", "/market/events", _one(MarketEventPage, 200),
                _query(marketId=market_id, after=after, limit=limit), resend_safe=True)


@endpoint("GET", "/market/candles")
def get_candles(market_id: str, interval: CandleInterval, *, from_: Optional[_dt.datetime] = None,
                to: Optional[_dt.datetime] = None) -> Call[Candles]:
    """OHLC of the YES price, volume and trade count per ``interval`` (intervals without trades left out)."""
    params = _query(marketId=market_id, interval=interval, to=to)
    if from_ is not None:
        assert params is not None
        params["from"] = format_time(from_)
    return Call("GET", "/market/candles", _one(Candles, 200), params, resend_safe=True)


# --- Endpoints: trading ---------------------------------------------------------------------


@endpoint("POST", "/order")
def place_order(market_id: str, side: Side, outcome: Outcome, price: int, quantity: int, *,
                time_in_force: Optional[TimeInForce] = None, expires_at: Optional[_dt.datetime] = None,
                post_only: Optional[bool] = None, client_order_id: Union[str, None, Auto] = AUTO,
                self_trade_prevention: Optional[SelfTradePrevention] = None,
                order_group_id: Optional[str] = None) -> Call[PlacedOrder]:
    """Places a limit order. By default it gets a fresh ``client_order_id``, so that a placement
    whose answer was lost is sent again safely (the exchange answers the order it already has,
    ``replayed=True``). ``client_order_id=None`` sends none. ``order_group_id`` places it into one
    of your order groups."""
    body = _order_body(OrderRequest(market_id, side, outcome, price, quantity, time_in_force, expires_at,
                                    post_only, client_order_id, self_trade_prevention, order_group_id))
    return Call("POST", "/order", _placed, body=body, has_body=True, resend_safe="clientOrderId" in body)


@endpoint("POST", "/orders/batch")
def place_orders(orders: Sequence[OrderRequest]) -> Call[list[BatchResult]]:
    """Places 1 to 20 orders, each answered on its own, in order. Each gets a fresh client order
    id unless it has one (or ``client_order_id=None``)."""
    bodies = [_order_body(o) for o in orders]
    return Call("POST", "/orders/batch", _batch, body={"orders": bodies}, has_body=True,
                resend_safe=all("clientOrderId" in b for b in bodies))


@endpoint("POST", "/order/amend")
def amend_order(order_id: Optional[str] = None, *, client_order_id: Optional[str] = None,
                price: Optional[int] = None, quantity: Optional[int] = None) -> Call[PlacedOrder]:
    """Changes a resting order's price and/or remaining ``quantity``, atomically; the answer lists
    the trades a crossing price made."""
    body = {**_order_ref(order_id, client_order_id), **_object(price=price, quantity=quantity)}
    return Call("POST", "/order/amend", _amended, body=body, has_body=True)


@endpoint("POST", "/cancel-order")
def cancel_order(order_id: Optional[str] = None, *, client_order_id: Optional[str] = None) -> Call[Order]:
    """Cancels one of your open orders, by id or by client order id; answers it as cancelled."""
    return Call("POST", "/cancel-order", _one(Order, 200), body=_order_ref(order_id, client_order_id),
                has_body=True)


@endpoint("POST", "/orders/cancel")
def cancel_orders(order_ids: Optional[Sequence[str]] = None, *, market_id: Optional[str] = None,
                  side: Optional[Side] = None, outcome: Optional[Outcome] = None) -> Call[CancelResult]:
    """Cancels the orders named (1 to 100), or every resting order of yours in ``market_id``
    (optionally of one side and outcome); each is cancelled or refused on its own."""
    if (order_ids is None) == (market_id is None):
        raise ValueError("give order_ids or market_id (one of the two)")
    body = _object(orderIds=list(order_ids) if order_ids is not None else None, marketId=market_id,
                   side=side, outcome=outcome)
    return Call("POST", "/orders/cancel", _cancelled_many, body=body, has_body=True)


@endpoint("POST", "/cancel-everything")
def cancel_everything() -> Call[list[Order]]:
    """Cancels every open order of yours in every market; answers them (maybe none)."""
    return Call("POST", "/cancel-everything", _list_of(Order, None, 200))


@endpoint("POST", "/heartbeat")
def heartbeat(timeout_seconds: int) -> Call[HeartbeatState]:
    """Arms the dead-man switch for ``timeout_seconds`` (5 to 300) from now, or disarms it with 0:
    unless renewed in time, your open orders are cancelled."""
    return Call("POST", "/heartbeat", _one(HeartbeatState, 200), body={"timeoutSeconds": timeout_seconds},
                has_body=True, resend_safe=True)


@endpoint("GET", "/order")
def get_order(order_id: Optional[str] = None, *, client_order_id: Optional[str] = None) -> Call[Order]:
    """One of your orders, by id or by client order id."""
    return Call("GET", "/order", _one(Order, 200), _query(**_order_ref(order_id, client_order_id)),
                resend_safe=True)


@endpoint("GET", "/order/queue-position")
def get_queue_position(order_id: str) -> Call[QueuePosition]:
    """Where one of your resting orders stands in its price level's queue: the shares ahead of it
    and the level's, in the order's own terms."""
    return Call("GET", "/order/queue-position", _one(QueuePosition, 200), _query(orderId=order_id), resend_safe=True)


@endpoint("GET", "/orders/queue-positions")
def get_queue_positions(order_ids: Sequence[str]) -> Call[QueuePositions]:
    """``get_queue_position`` for 1 to 100 orders at once; each order without a place is in
    ``errors``, with what ``get_queue_position`` would have answered for it."""
    if isinstance(order_ids, str):
        raise TypeError("order_ids is a sequence of order ids, not one string")
    return Call("GET", "/orders/queue-positions", _queue_positions, _query(orderIds=",".join(order_ids)),
                resend_safe=True)


@endpoint("GET", "/orders")
def list_orders(*, market_id: Optional[str] = None, status: Optional[OrderStatus] = None,
                limit: Optional[int] = None, cursor: Optional[str] = None) -> Call[OrderPage]:
    """A page of your orders, newest first (``next_cursor`` continues it)."""
    return Call("GET", "/orders", _one(OrderPage, 200),
                _query(marketId=market_id, status=status, limit=limit, cursor=cursor), resend_safe=True)


@endpoint("GET", "/fills")
def list_fills(*, market_id: Optional[str] = None, limit: Optional[int] = None,
               cursor: Optional[str] = None) -> Call[FillPage]:
    """A page of your fills as maker and taker, newest first."""
    return Call("GET", "/fills", _one(FillPage, 200), _query(marketId=market_id, limit=limit, cursor=cursor),
                resend_safe=True)


# --- Endpoints: account ---------------------------------------------------------------------


@endpoint("GET", "/account")
def get_account() -> Call[Account]:
    """Your account and its cash, available and locked (cents)."""
    return Call("GET", "/account", _one(Account, 200), resend_safe=True)


@endpoint("GET", "/positions")
def list_positions() -> Call[list[Position]]:
    """Your holdings with a positive quantity, one per market and outcome."""
    return Call("GET", "/positions", _list_of(Position, "positions", 200), resend_safe=True)


@endpoint("GET", "/settlements")
def list_settlements(*, limit: Optional[int] = None, cursor: Optional[str] = None) -> Call[SettlementPage]:
    """A page of what settled markets paid you, per outcome held, newest first."""
    return Call("GET", "/settlements", _one(SettlementPage, 200), _query(limit=limit, cursor=cursor),
                resend_safe=True)


@endpoint("GET", "/account/events")
def get_account_events(*, after: Optional[str] = None, limit: Optional[int] = None) -> Call[AccountEventPage]:
    """Your account's feed events after the cursor ``after`` (a page's ``cursor``, a feed
    message's; ``None``: from the oldest kept), oldest first, and the ``cursor`` after them."""
    return Call("GET", "/account/events", _one(AccountEventPage, 200), _query(after=after, limit=limit),
                resend_safe=True)


@endpoint("GET", "/account/limits")
def get_account_limits() -> Call[AccountLimits]:
    """Your read and write rate limits and what is left of them."""
    return Call("GET", "/account/limits", _one(AccountLimits, 200), resend_safe=True)


@endpoint("GET", "/account/fees")
def get_account_fees(since: Optional[_dt.datetime] = None, until: Optional[_dt.datetime] = None) -> Call[AccountFees]:
    """What your fills made at or after ``since`` and before ``until`` paid in fees and were paid
    in rebates, in cents (default: the 30 days before now; at most 366 days a call). A
    ``BadRequestError`` ``out_of_range`` when ``since`` is not before ``until`` or the period is
    longer."""
    return Call("GET", "/account/fees", _one(AccountFees, 200), _query(since=since, until=until), resend_safe=True)


@endpoint("GET", "/account/keys")
def list_account_keys() -> Call[list[ApiKey]]:
    """Your API keys, revoked ones included, newest first: each one's scope, expiry, address
    allowlist and last use, never its secret (``current`` marks the key you called with)."""
    return Call("GET", "/account/keys", _list_of(ApiKey, "keys", 200), resend_safe=True)


@endpoint("POST", "/account/keys")
def create_account_key(*, label: Optional[str] = None, scope: Optional[KeyScope] = None,
                       expires_at: Optional[_dt.datetime] = None, ip_allowlist: Optional[Sequence[str]] = None,
                       public_key: Optional[str] = None) -> Call[NewKey]:
    """Makes another key of your account, with a key of scope ``keys``: ``api_key`` of the answer is
    the whole key, shown this once. What you leave out is the default: scope ``trade``, and the
    expiry and address allowlist of the key that makes it. A key never makes one that may do more
    than itself: a wider scope, a later expiry or a wider allowlist is a ``PermissionDeniedError`` with
    ``code`` ``exceeds_own_key`` naming the ``field``; past 100 active keys, ``too_many_keys``.
    ``public_key`` (base64 or PEM Ed25519) makes a signing key. Not sent again on its own: a retry
    could make a second key."""
    body: dict[str, Any] = {}
    if label is not None:
        body["label"] = label
    if scope is not None:
        body["scope"] = scope
    if expires_at is not None:
        body["expiresAt"] = format_time(expires_at)
    if ip_allowlist is not None:
        body["ipAllowlist"] = list(ip_allowlist)
    if public_key is not None:
        body["publicKey"] = public_key
    return Call("POST", "/account/keys", _one(NewKey, 201), body=body, has_body=True)


@endpoint("DELETE", "/account/keys/{id}")
def revoke_account_key(key_id: str) -> Call[None]:
    """Revokes one of your keys (its ``id`` as ``list_account_keys`` shows it; your own included),
    with a key of scope ``keys``: every request with it is refused from then on, on every replica
    of the API. ``NotFoundError`` (``key_not_found``) for a key that is not an active key of yours."""
    return Call("DELETE", f"/account/keys/{_path_id(key_id)}", _nothing(204))


@endpoint("GET", "/account/risk-limits")
def get_risk_limits() -> Call[RiskLimits]:
    """Your self-set risk limits (None: none) and what you use of them now."""
    return Call("GET", "/account/risk-limits", _one(RiskLimits, 200), resend_safe=True)


@endpoint("PUT", "/account/risk-limits")
def set_risk_limits(max_position: Optional[int] = None, max_locked_cash: Optional[int] = None) -> Call[RiskLimits]:
    """Replaces your risk limits; None removes one. ``max_position`` caps, per market and outcome,
    the shares held plus those of open BUY orders; ``max_locked_cash`` the cents your open orders
    lock across all markets. An order that could pass one is refused (400 ``risk_limit_exceeded``,
    ``field`` naming the limit); a limit below what is used refuses only orders that add to it."""
    return Call("PUT", "/account/risk-limits", _one(RiskLimits, 200),
                body={"maxPosition": max_position, "maxLockedCash": max_locked_cash}, has_body=True, resend_safe=True)


@endpoint("POST", "/order-groups")
def create_order_group(fill_limit: int, window_seconds: int) -> Call[OrderGroup]:
    """Makes an order group: once the shares its orders fill within ``window_seconds`` reach
    ``fill_limit``, its resting orders are cancelled and it refuses orders (409
    ``order_group_triggered``) until ``reset_order_group``. Needs a trade key."""
    return Call("POST", "/order-groups", _one(OrderGroup, 201),
                body={"fillLimit": fill_limit, "windowSeconds": window_seconds}, has_body=True)


@endpoint("GET", "/order-groups")
def list_order_groups(*, limit: Optional[int] = None,
                      cursor: Optional[str] = None) -> Call[Union[list[OrderGroup], OrderGroupPage]]:
    """Your order groups, newest first, each with its fills in the window ending now. Without
    ``limit`` or ``cursor``, all of them as a list (an account keeps at most 1,000 by default);
    with either, an :class:`OrderGroupPage` (``next_cursor`` continues it)."""
    parse: Parser[Union[list[OrderGroup], OrderGroupPage]]
    if limit is None and cursor is None:
        parse = _list_of(OrderGroup, None, 200)
        return Call("GET", "/order-groups", parse, resend_safe=True)
    parse = _one(OrderGroupPage, 200)
    return Call("GET", "/order-groups", parse, _query(limit=limit, cursor=cursor), resend_safe=True)


@endpoint("GET", "/order-groups/{id}")
def get_order_group(group_id: str) -> Call[OrderGroup]:
    """One of your order groups (``NotFoundError`` for no such group, or another account's)."""
    return Call("GET", f"/order-groups/{_path_id(group_id)}", _one(OrderGroup, 200), resend_safe=True)


@endpoint("DELETE", "/order-groups/{id}")
def delete_order_group(group_id: str) -> Call[None]:
    """Deletes one of your groups that no open order is in, to make room under the most an account
    keeps. ``ConflictError`` (``order_group_has_open_orders``) while an order of it is open;
    ``NotFoundError`` (``order_group_not_found``) for no such group. Needs a trade key."""
    return Call("DELETE", f"/order-groups/{_path_id(group_id)}", _nothing(204))


@endpoint("POST", "/order-groups/{id}/reset")
def reset_order_group(group_id: str) -> Call[OrderGroup]:
    """Lets a triggered group take orders again and restarts its count. Needs a trade key."""
    return Call("POST", f"/order-groups/{_path_id(group_id)}/reset", _one(OrderGroup, 200))


def _path_id(group_id: str) -> str:
    """A group's, a key's or a series' id as a path segment: a UUID is sent as it is, anything else escaped (the API
    refuses it with 400 invalid_uuid)."""
    return urllib.parse.quote(group_id, safe="")


@endpoint("GET", "/events")
def list_events(*, status: Optional[MarketStatus] = None, limit: Optional[int] = None,
                cursor: Optional[str] = None) -> Call[EventPage]:
    """A page of events, newest first, optionally of one status (``next_cursor`` continues it)."""
    return Call("GET", "/events", _one(EventPage, 200), _query(status=status, limit=limit, cursor=cursor),
                resend_safe=True)


@endpoint("GET", "/event")
def get_event(event_id: str) -> Call[EventDetail]:
    """One event with each outcome's market, best YES bid and ask, last price and YES mid, and the
    mids' sum, and the series that listed it if one did (``series_id``; ``NotFoundError`` with
    ``code`` ``event_not_found`` if there is none)."""
    return Call("GET", "/event", _one(EventDetail, 200), _query(eventId=event_id), resend_safe=True)


@endpoint("GET", "/series")
def list_series(*, limit: Optional[int] = None, cursor: Optional[str] = None) -> Call[SeriesPage]:
    """A page of series (recurring markets), newest first (``next_cursor`` continues it)."""
    return Call("GET", "/series", _one(SeriesPage, 200), _query(limit=limit, cursor=cursor), resend_safe=True)


@endpoint("GET", "/series/{id}")
def get_series(series_id: str) -> Call[SeriesDetail]:
    """One series with its instances not settled yet, soonest to close first: how a bot finds a
    series' next market (``NotFoundError`` with ``code`` ``series_not_found`` if there is none)."""
    return Call("GET", f"/series/{_path_id(series_id)}", _one(SeriesDetail, 200), resend_safe=True)


@endpoint("POST", "/event/convert")
def convert_event_shares(event_id: str, outcomes: Sequence[str], quantity: int, *,
                         client_request_id: Union[str, None, Auto] = AUTO) -> Call[Conversion]:
    """Turns ``quantity`` NO shares of each of k of an event's ``outcomes`` (their keys) into
    ``quantity`` YES shares of each other outcome and ``(k - 1) * 100 * quantity`` cents. By
    default it gets a fresh ``client_request_id``, so that a conversion whose answer was lost is
    sent again safely (``replayed=True``). Refusals: ``BadRequestError`` ``insufficient_shares``
    (shares locked by open SELL orders do not count) or ``invalid_outcomes``, ``ConflictError``
    ``event_not_open`` or ``client_request_id_reused``, ``NotFoundError`` ``event_not_found``.
    Needs a trade key."""
    body = _object(eventId=event_id, outcomes=list(outcomes), quantity=quantity,
                   clientRequestId=_client_order_id(client_request_id))
    return Call("POST", "/event/convert", _converted, body=body, has_body=True,
                resend_safe="clientRequestId" in body)


@endpoint("POST", "/ws-token")
def create_ws_token() -> Call[WsToken]:
    """A one-minute, single-use token for a browser to connect to the feed (``/ws?token=``)."""
    return Call("POST", "/ws-token", _one(WsToken, 201))


# --- Retries --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryInfo:
    """What an ``on_retry`` hook is told before the SDK waits and sends a request again."""

    method: str
    path: str
    #: The attempt that just failed (1 for the first).
    attempt: int
    #: Seconds the SDK waits before the next attempt.
    delay: float
    #: The answer's status (429, 503, ...), or None when no answer came.
    status: Optional[int]
    #: The failure: an ``ApiError`` for an answer, else the transport's exception.
    error: BaseException


@dataclass(frozen=True)
class RetryPolicy:
    """When the SDK sends a request again, and how long it waits first.

    - ``429``: always (the exchange changed nothing), after ``Retry-After`` seconds.
    - no connection made (refused, connect timeout): always, after a back-off.
    - an answer lost after the request may have arrived (connection cut, read timeout), or a
      ``500``/``502``/``503``/``504``: only for calls safe to resend: reads, the heartbeat,
      and placements with client order ids (which the exchange answers as replays).
    - anything else (4xx): never.

    Back-off: ``backoff_base × 2^(attempt−1)`` seconds, at most ``backoff_max``, with full
    jitter; a ``Retry-After`` longer than ``max_retry_after`` is not waited for (the error is
    raised). ``max_attempts`` counts the first try (1 disables retries).
    """

    max_attempts: int = 4
    backoff_base: float = 0.1
    backoff_max: float = 5.0
    max_retry_after: float = 60.0

    def backoff(self, attempt: int) -> float:
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)))

    def after_answer(self, call: Call[Any], attempt: int, error: errors.ApiError) -> Optional[float]:
        """Seconds to wait before sending ``call`` again after an error answer; None: give up."""
        if attempt >= self.max_attempts:
            return None
        if isinstance(error, errors.RateLimitedError):
            wait = error.retry_after if error.retry_after is not None else self.backoff(attempt)
            return wait if wait <= self.max_retry_after else None
        if error.status in (500, 502, 503, 504) and call.resend_safe:
            asked = errors.parse_retry_after(error.headers.get("retry-after"))
            if asked is None:
                return self.backoff(attempt)
            return asked if asked <= self.max_retry_after else None
        return None

    def after_transport_error(self, call: Call[Any], attempt: int, maybe_sent: bool) -> Optional[float]:
        """Seconds to wait before sending ``call`` again after no answer came; None: give up."""
        if attempt >= self.max_attempts or (maybe_sent and not call.resend_safe):
            return None
        return self.backoff(attempt)


NO_RETRIES = RetryPolicy(max_attempts=1)


# --- Configuration shared by both clients ---------------------------------------------------

DEFAULT_URL = "http://127.0.0.1:8080"
USER_AGENT = "pmx-python/0.1.0"


def api_base(url: str) -> str:
    """The API's base URL, ending in /api/v1, from the exchange's address or the API's URL."""
    url = url.rstrip("/")
    if not (url.startswith("http://") or url.startswith("https://")):
        raise ValueError(f"the exchange's URL must start with http:// or https://, got {url!r}")
    return url if url.endswith("/api/v1") else url + "/api/v1"


def feed_url(base: str) -> str:
    """The live feed's WebSocket URL for the API's base URL."""
    return "ws" + base[len("http"):] + "/ws"


def resolve_key(api_key: Optional[str], env: Mapping[str, str]) -> str:
    key = api_key if api_key is not None else env.get("PMX_API_KEY")
    if not key:
        raise ValueError("no API key: pass api_key=... or set PMX_API_KEY (create a key on the exchange's /settings page)")
    return key


def describe(call: Call[Any]) -> str:
    return f"{call.method} /api/v1{call.path}"


def read_json(content: bytes, status: int) -> Any:
    """The answer's body as JSON: None when empty. A success that is not JSON is a
    ProtocolError; an error that is not JSON (a proxy's page) becomes an error body naming it."""
    if not content.strip():
        return None
    try:
        return json.loads(content)
    except ValueError:
        text = content[:200].decode("utf-8", "replace")
        if 200 <= status < 300:
            raise errors.ProtocolError(f"the exchange answered HTTP {status} with a body that is not JSON: {text!r}") from None
        return {"error": f"HTTP {status} with a body that is not pmx's JSON error (a proxy in the way?): {text!r}"}


def maybe_sent(e: httpx.TransportError) -> bool:
    """Whether a request that failed with ``e`` may have reached the exchange: only a failure to
    connect (or to get a connection from the pool) proves it did not."""
    return not isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


def transport_error(call: Call[Any], e: BaseException, sent: bool, attempts: int, base_url: str) -> errors.TransportError:
    what = f"{describe(call)} got no answer after {attempts} attempt{'s' if attempts > 1 else ''} ({type(e).__name__}: {e})"
    if not sent:
        hint = f"could not connect: check that the exchange is running at {base_url}"
    elif call.resend_safe:
        hint = "it is safe to send it again"
    else:
        hint = ("it may have reached the exchange and taken effect, so it was not sent again: check "
                "(e.g. get_order, list_orders) before repeating it; placements with a client_order_id "
                "are safe to repeat with the same id")
    return errors.TransportError(f"{what}: {hint}", maybe_sent=sent)


@dataclass
class Step(Generic[T]):
    """What to do after one attempt: return ``value`` (done) or wait ``delay`` and try again."""

    done: bool
    value: Optional[T] = None
    delay: float = 0.0


class Session:
    """The transport-independent half of a client: the base URL, the headers, the retry policy
    and what each attempt's outcome means. The sync and async clients hold one each."""

    def __init__(self, url: Optional[str], api_key: Optional[str], retry: RetryPolicy,
                 on_retry: Optional[Callable[[RetryInfo], None]], env: Mapping[str, str],
                 signing_key: Any = None) -> None:
        self.base_url = api_base(url or env.get("PMX_URL") or DEFAULT_URL)
        self.api_key = resolve_key(api_key, env)
        self.retry = retry
        self.on_retry = on_retry
        self.signer = signing.Signer(signing_key) if signing_key is not None else None
        self.headers = {"Authorization": signing.authorization(self.api_key, self.signer), "User-Agent": USER_AGENT,
                        "Accept": "application/json"}

    def request(self, call: Call[Any]) -> dict[str, Any]:
        """The arguments of ``httpx.Client.request`` (or the async one's) for ``call``."""
        headers = self.headers
        content = None
        if call.has_body:
            headers = {**headers, "Content-Type": "application/json"}
            content = json.dumps(call.body, separators=(",", ":"))
        if self.signer is None:
            return {"method": call.method, "url": self.base_url + call.path, "params": call.params,
                    "content": content, "headers": headers}
        # Signed afresh at each attempt, over the target exactly as httpx will send it.
        url = httpx.URL(self.base_url + call.path, params=call.params)
        body = content.encode("utf-8") if content is not None else b""
        headers = {**headers, **self.signer.headers(call.method, url.raw_path.decode("ascii"), body)}
        return {"method": call.method, "url": url, "content": content, "headers": headers}

    def answered(self, call: Call[T], attempt: int, resp: httpx.Response) -> Step[T]:
        body = read_json(resp.content, resp.status_code)
        if resp.is_success:
            return Step(True, call.parse(resp.status_code, body, resp.headers))
        err = errors.error_from_response(resp.status_code, body, resp.headers)
        delay = self.retry.after_answer(call, attempt, err)
        if delay is None:
            raise err
        self._notify(call, attempt, delay, resp.status_code, err)
        return Step(False, delay=delay)

    def failed(self, call: Call[T], attempt: int, e: httpx.TransportError) -> Step[T]:
        sent = maybe_sent(e)
        delay = self.retry.after_transport_error(call, attempt, sent)
        if delay is None:
            raise transport_error(call, e, sent, attempt, self.base_url) from e
        self._notify(call, attempt, delay, None, e)
        return Step(False, delay=delay)

    def _notify(self, call: Call[Any], attempt: int, delay: float, status: Optional[int], err: BaseException) -> None:
        if self.on_retry is not None:
            self.on_retry(RetryInfo(call.method, call.path, attempt, delay, status, err))


def client_method(build: Callable[..., Call[Any]], run: Callable[..., Any], awaitable: bool = False) -> Callable[..., Any]:
    """The client's method for an endpoint: builds the call and hands it to ``run(self, call)``.
    It carries the builder's name, documentation and signature (with ``self``, and returning
    what the call's answer is: ``T`` for ``Call[T]``, or ``Awaitable[T]``)."""

    @functools.wraps(build)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return run(self, build(*args, **kwargs))

    sig = inspect.signature(build)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ret = sig.return_annotation
    if isinstance(ret, str) and ret.startswith("Call[") and ret.endswith("]"):
        ret = ret[len("Call["):-1]
        if awaitable:
            ret = f"Awaitable[{ret}]"
    method.__signature__ = sig.replace(parameters=[self_param, *sig.parameters.values()],  # type: ignore[attr-defined]
                                       return_annotation=ret)
    return method


def endpoint_of(method: Callable[..., Any]) -> Optional[Callable[..., Call[Any]]]:
    """The builder a client method wraps (for the tests that check every endpoint has one)."""
    return getattr(method, "__wrapped__", None)


__all__ = ["Call", "ENDPOINTS", "RetryPolicy", "RetryInfo", "NO_RETRIES", "new_client_order_id"]
