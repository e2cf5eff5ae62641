"""Error answers become typed exceptions carrying the status, code and field, and are not retried."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import pmx
from conftest import ready, run_with
from pmxdev import PmxDev


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_error_answers_are_typed(exchange: PmxDev, flavour: str) -> None:
    key, _ = exchange.new_account()
    other_key, _ = exchange.new_account()
    market = exchange.new_market()
    retries: list[pmx.RetryInfo] = []

    async def scenario(c: Any) -> None:
        async def refused(call: Any, cls: type[pmx.ApiError], status: int, code: str, field: Any = None) -> pmx.ApiError:
            with pytest.raises(cls) as info:
                await ready(call())
            err = info.value
            assert (err.status, err.code, err.field) == (status, code, field), err
            assert err.message  # the server's sentence, for people
            assert code in str(err) and (field is None or repr(field) in str(err))
            return err

        # 400 naming the field at fault
        await refused(lambda: c.place_order(market, "BUY", "YES", 150, 1), pmx.BadRequestError, 400, "out_of_range", "price")
        await refused(lambda: c.place_order(market, "BUY", "YES", 50, 0), pmx.BadRequestError, 400, "out_of_range", "quantity")
        await refused(lambda: c.place_order(market, "BUY", "MAYBE", 50, 1), pmx.BadRequestError, 400, "invalid_value", "outcome")
        await refused(lambda: c.get_market("not-a-uuid"), pmx.BadRequestError, 400, "invalid_uuid", "marketId")
        # 400: the exchange's refusals
        err = await refused(lambda: c.place_order(market, "BUY", "YES", 99, 1_000_000), pmx.BadRequestError, 400,
                            "insufficient_funds", "quantity")
        assert "cents" in err.message
        await refused(lambda: c.place_order(market, "SELL", "YES", 50, 1), pmx.BadRequestError, 400,
                      "insufficient_shares", "quantity")
        # an unknown market: 400 where the contract lists no 404, 404 where it does
        unknown = str(uuid.uuid4())
        await refused(lambda: c.place_order(unknown, "BUY", "YES", 50, 1), pmx.BadRequestError, 400,
                      "market_not_found", "marketId")
        await refused(lambda: c.get_order_book(unknown), pmx.BadRequestError, 400, "market_not_found", "marketId")
        await refused(lambda: c.get_market(unknown), pmx.NotFoundError, 404, "market_not_found", "marketId")
        await refused(lambda: c.get_order(unknown), pmx.NotFoundError, 404, "order_not_found", "orderId")
        # 403: another account's order
        with pmx.Client(exchange.url, other_key) as other:
            theirs = other.place_order(market, "BUY", "YES", 10, 1)
        await refused(lambda: c.cancel_order(theirs.id), pmx.PermissionDeniedError, 403, "not_your_order", "orderId")
        # 400 order_not_open: cancelling twice
        mine = await ready(c.place_order(market, "BUY", "YES", 11, 1))
        await ready(c.cancel_order(mine.id))
        await refused(lambda: c.cancel_order(mine.id), pmx.BadRequestError, 400, "order_not_open", "orderId")
        # 409: a client order id given to other parameters
        await refused(lambda: c.place_order(market, "BUY", "YES", 12, 1, client_order_id=mine.client_order_id),
                      pmx.ConflictError, 409, "client_order_id_reused", "clientOrderId")
        # 400 market_not_open
        closed = exchange.new_market("Closed?")
        exchange.close_market(closed)
        await refused(lambda: c.place_order(closed, "BUY", "YES", 50, 1), pmx.BadRequestError, 400, "market_not_open", "marketId")
        # 409 market_halted: a paused market refuses placements and amends, and still cancels
        halted = exchange.new_market("Halted?")
        resting = await ready(c.place_order(halted, "BUY", "YES", 20, 1))
        exchange.pause_market(halted)
        assert (await ready(c.get_market(halted))).halted == "market"
        await refused(lambda: c.place_order(halted, "BUY", "YES", 21, 1), pmx.ConflictError, 409, "market_halted", "marketId")
        assert (await ready(c.cancel_order(resting.id))).status == "CANCELLED"
        exchange.pause_market(halted, False)
        assert (await ready(c.get_market(halted))).halted is None
        await ready(c.place_order(halted, "BUY", "YES", 21, 1))
        # 400 on the heartbeat's range
        await refused(lambda: c.heartbeat(3), pmx.BadRequestError, 400, "out_of_range", "timeoutSeconds")

    run_with(flavour, exchange.url, key, scenario, on_retry=retries.append)
    assert retries == []  # a 4xx other than 429 is never sent again


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_key_outside_its_rights_is_refused(exchange: PmxDev, flavour: str) -> None:
    market = exchange.new_market()
    read_key, _ = exchange.new_account(scope="read")
    fenced_key, _ = exchange.new_account(ipAllowlist=["192.0.2.0/24"])

    async def reader(c: Any) -> None:
        with pytest.raises(pmx.PermissionDeniedError) as info:
            await ready(c.place_order(market, "BUY", "YES", 50, 1))
        assert (info.value.status, info.value.code, info.value.field) == (403, "insufficient_scope", "trade")
        with pytest.raises(pmx.PermissionDeniedError) as info:
            await ready(c.cancel_everything())
        assert (info.value.code, info.value.field) == ("insufficient_scope", "cancel")
        keys = await ready(c.list_account_keys())
        assert [(k.scope, k.current) for k in keys] == [("read", True)]
        assert (await ready(c.list_orders())).orders == []

    async def fenced(c: Any) -> None:
        with pytest.raises(pmx.PermissionDeniedError) as info:
            await ready(c.get_account())
        assert info.value.code == "ip_not_allowed"

    run_with(flavour, exchange.url, read_key, reader)
    run_with(flavour, exchange.url, fenced_key, fenced)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_unknown_key_is_an_authentication_error(exchange: PmxDev, flavour: str) -> None:
    async def scenario(c: Any) -> None:
        with pytest.raises(pmx.AuthenticationError) as info:
            await ready(c.get_account())
        assert info.value.status == 401 and info.value.code
        assert info.value.headers.get("www-authenticate", "").startswith("Bearer")

    run_with(flavour, exchange.url, "pmx_not_a_real_key", scenario)


def test_the_order_must_be_named_once(client: pmx.Client) -> None:
    with pytest.raises(ValueError, match="order_id or by client_order_id"):
        client.cancel_order()
    with pytest.raises(ValueError, match="order_id or by client_order_id"):
        client.get_order("a", client_order_id="b")
    with pytest.raises(ValueError, match="order_ids or market_id"):
        client.cancel_orders()


def test_missing_key_says_where_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PMX_API_KEY", raising=False)
    with pytest.raises(ValueError, match="PMX_API_KEY"):
        pmx.Client("http://127.0.0.1:1")
    monkeypatch.setenv("PMX_API_KEY", "from-env")
    monkeypatch.setenv("PMX_URL", "http://127.0.0.1:1/")
    with pmx.Client() as c:
        assert c.base_url == "http://127.0.0.1:1/api/v1"
