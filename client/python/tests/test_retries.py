"""Retries: a placement whose answer is lost is sent again with the same client order id, and the
exchange answers it as a replay (200, Idempotent-Replayed: true) without placing a second order.
A request that may have taken effect and is not safe to repeat is never sent again."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import pmx
from conftest import ready, run_with
from faultproxy import FaultProxy
from pmxdev import PmxDev


def test_a_repeat_with_the_same_client_order_id_is_a_replay(exchange: PmxDev, client: pmx.Client, market: str) -> None:
    first = client.place_order(market, "BUY", "YES", 20, 3, client_order_id="same-id")
    again = client.place_order(market, "BUY", "YES", 20, 3, client_order_id="same-id")
    assert (first.replayed, again.replayed) == (False, True)
    assert again.id == first.id and again.trades == [] and again.status == "OPEN"
    # What the SDK reads as a replay is the exchange's documented answer.
    raw = httpx.post(f"{exchange.url}/api/v1/order", headers={"Authorization": f"Bearer {client._session.api_key}"},
                     json={"marketId": market, "side": "BUY", "outcome": "YES", "price": 20, "quantity": 3,
                           "clientOrderId": "same-id"})
    assert raw.status_code == 200 and raw.headers["Idempotent-Replayed"] == "true"
    assert [o.id for o in client.list_orders(market_id=market).orders] == [first.id]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_placement_whose_answer_is_lost_is_replayed(exchange: PmxDev, proxy: FaultProxy, key: str,
                                                      market: str, flavour: str) -> None:
    retries: list[pmx.RetryInfo] = []

    async def scenario(c: Any) -> None:
        # The first attempt reaches the exchange and places the order; its answer is cut off.
        proxy.drop_responses(1)
        placed = await ready(c.place_order(market, "BUY", "YES", 33, 5))
        assert proxy.dropped_responses == 1
        assert placed.replayed and placed.status == "OPEN" and placed.client_order_id
        assert [(r.attempt, r.status, r.path) for r in retries] == [(1, None, "/order")]
        assert isinstance(retries[0].error, httpx.TransportError)
        orders = (await ready(c.list_orders(market_id=market))).orders
        assert [(o.id, o.client_order_id) for o in orders] == [(placed.id, placed.client_order_id)]

        # The same for a batch whose every placement has a client order id.
        proxy.drop_responses(1)
        results = await ready(c.place_orders([pmx.OrderRequest(market, "BUY", "YES", 30 + i, 1) for i in range(3)]))
        assert [r.status for r in results] == [200, 200, 200]
        assert all(r.order is not None and r.order.replayed for r in results)
        assert len((await ready(c.list_orders(market_id=market))).orders) == 4

        # A read whose answer is lost is simply read again.
        proxy.drop_responses(1)
        account = await ready(c.get_account())
        assert account.locked == 33 * 5 + 30 + 31 + 32
        assert len(retries) == 3

    run_with(flavour, proxy.url, key, scenario, on_retry=retries.append)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_what_is_unsafe_to_repeat_is_not_sent_again(exchange: PmxDev, proxy: FaultProxy, key: str,
                                                   market: str, flavour: str) -> None:
    retries: list[pmx.RetryInfo] = []

    async def scenario(c: Any) -> None:
        # Without a client order id, a placement whose answer was lost may have placed an order:
        # the SDK says so rather than risk a second one.
        proxy.drop_responses(1)
        with pytest.raises(pmx.TransportError) as info:
            await ready(c.place_order(market, "BUY", "YES", 25, 2, client_order_id=None))
        assert info.value.maybe_sent and "may have reached the exchange" in str(info.value)
        orders = (await ready(c.list_orders(market_id=market))).orders
        assert [(o.price, o.client_order_id) for o in orders] == [(25, None)]  # it did
        # Nor is a cancel sent again.
        proxy.drop_responses(1)
        with pytest.raises(pmx.TransportError):
            await ready(c.cancel_order(orders[0].id))
        assert (await ready(c.get_order(orders[0].id))).status == "CANCELLED"

    run_with(flavour, proxy.url, key, scenario, on_retry=retries.append)
    assert retries == []


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_conversion_whose_answer_is_lost_is_replayed(exchange: PmxDev, proxy: FaultProxy, key: str,
                                                       other_key: str, flavour: str) -> None:
    event = exchange.new_event(["a", "b"], f"Retried conversions ({flavour})?")
    retries: list[pmx.RetryInfo] = []
    with pmx.Client(exchange.url, other_key) as bob:
        for o in event["outcomes"]:
            bob.place_order(o["marketId"], "BUY", "YES", 30, 4)

    async def scenario(c: Any) -> None:
        for o in event["outcomes"]:
            await ready(c.place_order(o["marketId"], "BUY", "NO", 70, 4))
        retries.clear()
        # The first attempt converts; its answer is cut off; the repeat is answered by it.
        proxy.drop_responses(1)
        conv = await ready(c.convert_event_shares(event["id"], ["a", "b"], 2))
        assert proxy.dropped_responses == 1
        assert conv.replayed and conv.cash == 200 and conv.client_request_id
        assert [(r.attempt, r.path) for r in retries] == [(1, "/event/convert")]
        # Without a client request id, it is not sent again: it may have converted, and it did.
        proxy.drop_responses(1)
        with pytest.raises(pmx.TransportError) as info:
            await ready(c.convert_event_shares(event["id"], ["a", "b"], 1, client_request_id=None))
        assert info.value.maybe_sent
        assert len(retries) == 1
        events = (await ready(c.get_account_events())).events
        assert [(e.conversion.quantity, e.conversion.client_request_id) for e in events
                if e.type == "converted" and e.conversion is not None] == [(2, conv.client_request_id), (1, None)]

    run_with(flavour, proxy.url, key, scenario, on_retry=retries.append)


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_no_connection_is_retried_then_reported(flavour: str) -> None:
    # A port nothing listens on: bound, never listening.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        retries: list[pmx.RetryInfo] = []

        async def scenario(c: Any) -> None:
            with pytest.raises(pmx.TransportError) as info:
                await ready(c.cancel_everything())  # not safe to repeat once sent, but this never was
            assert not info.value.maybe_sent
            assert "could not connect" in str(info.value) and url in str(info.value)

        run_with(flavour, url, "key", scenario, on_retry=retries.append,
                 retry=pmx.RetryPolicy(max_attempts=3, backoff_base=0.01))
        assert [(r.attempt, r.status) for r in retries] == [(1, None), (2, None)]
