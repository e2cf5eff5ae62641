"""Every endpoint of the API through the SDK, against a real exchange, with the sync client and
with the async client (one scenario, run with each)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest

import pmx
from conftest import ready, run_with
from pmxdev import PmxDev

GRANT = 1_000_000  # pmx dev's default play-money grant, in cents


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_every_endpoint(exchange: PmxDev, flavour: str) -> None:
    alice_key, alice_id = exchange.new_account()
    bob_key, _ = exchange.new_account()
    market = exchange.new_market(f"Endpoints ({flavour})?")
    grouped_market = exchange.new_market(f"Order groups ({flavour})?")
    event = exchange.new_event(["a", "b", "c"], f"Events ({flavour})?")
    event_markets = [o["marketId"] for o in event["outcomes"]]

    async def scenario(alice: Any) -> None:
        bob = pmx.Client(exchange.url, bob_key) if flavour == "sync" else pmx.AsyncClient(exchange.url, bob_key)
        try:
            await with_two(alice, bob)
        finally:
            await ready(bob.close())

    async def with_two(alice: Any, bob: Any) -> None:
        # GET /account
        account = await ready(alice.get_account())
        assert isinstance(account, pmx.Account)
        assert (account.id, account.available, account.locked) == (alice_id, GRANT, 0)

        # GET /markets (all, by status, a page), GET /market
        everything = await ready(alice.list_markets())
        assert market in [m.id for m in everything.markets] and everything.next_cursor is None
        page = await ready(alice.list_markets(status="OPEN", limit=1))
        assert len(page.markets) == 1 and page.markets[0].status == "OPEN"
        m = await ready(alice.get_market(market))
        assert isinstance(m, pmx.Market)
        assert (m.id, m.status, m.resolved, m.outcome) == (market, "OPEN", False, None)
        assert m.created_at.tzinfo is not None
        assert isinstance(m.fees, pmx.Fees) and (m.fees.taker_bps, m.fees.maker_bps) == (0, 0)  # no fees

        # POST /order: a resting bid. It gets a client order id of its own, for safe retries.
        bid = await ready(alice.place_order(market, "BUY", "YES", 40, 10))
        assert isinstance(bid, pmx.PlacedOrder)
        assert (bid.status, bid.filled_quantity, bid.trades, bid.replayed) == ("OPEN", 0, [], False)
        assert bid.client_order_id is not None and bid.client_order_id.startswith("py-")
        assert (await ready(alice.get_account())).locked == 400

        # GET /market/order-book: one book, two mirrored views.
        book = await ready(alice.get_order_book(market))
        assert book.order_book_yes.bids == [pmx.Level(40, 10, 10)] and book.order_book_yes.asks == []
        assert book.order_book_no.asks == [pmx.Level(60, 10, 10)] and book.order_book_no.bids == []
        assert book.seq >= 1

        # Bob buys NO at 60: it meets Alice's YES bid at 40, and a pair is minted.
        taker = await ready(bob.place_order(market, "BUY", "NO", 60, 4, client_order_id=None))
        assert taker.client_order_id is None
        assert (taker.status, taker.filled_quantity) == ("FILLED", 4)
        assert [(t.outcome, t.side, t.price, t.yes_price, t.quantity) for t in taker.trades] == [("NO", "BUY", 60, 40, 4)]
        assert isinstance(taker.trades[0], pmx.PlacedTrade) and taker.trades[0].fee == 0

        # GET /market/trades, GET /fills
        trades = await ready(alice.list_market_trades(market, limit=10))
        assert [(t.id, t.yes_price) for t in trades] == [(taker.trades[0].id, 40)]
        fills = await ready(alice.list_fills(market_id=market))
        assert [(f.role, f.side, f.outcome, f.price, f.quantity, f.order_id) for f in fills.fills] == [
            ("MAKER", "BUY", "YES", 40, 4, bid.id)]
        bob_fills = await ready(bob.list_fills())
        assert [(f.role, f.price, f.trade_id) for f in bob_fills.fills] == [("TAKER", 60, taker.trades[0].id)]
        assert [f.fee for f in fills.fills + bob_fills.fills] == [0, 0]  # a market without fees

        # GET /account/fees: the last 30 days by default, then a period of one's own; nothing paid.
        fees = await ready(alice.get_account_fees())
        assert isinstance(fees, pmx.AccountFees) and fees.since < fees.until
        assert (fees.paid, fees.rebates, fees.net, fees.fills) == (0, 0, 0, 0)
        since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
        until = since + dt.timedelta(hours=2)
        period = await ready(bob.get_account_fees(since=since, until=until))
        assert (period.since, period.until, period.paid, period.net) == (since, until, 0, 0)
        try:
            await ready(alice.get_account_fees(since=until, until=since))
            raise AssertionError("a period ending before it starts was accepted")
        except pmx.BadRequestError as e:
            assert (e.code, e.field) == ("out_of_range", "since")

        # GET /positions
        positions = await ready(alice.list_positions())
        assert [(p.market_id, p.outcome, p.quantity, p.locked_quantity) for p in positions] == [(market, "YES", 4, 0)]

        # POST /order/amend: a new price, then less remaining at that price.
        amended = await ready(alice.amend_order(bid.id, price=41))
        assert (amended.id, amended.price, amended.quantity, amended.filled_quantity) == (bid.id, 41, 10, 4)
        amended = await ready(alice.amend_order(client_order_id=bid.client_order_id, quantity=3))
        assert (amended.price, amended.quantity, amended.status) == (41, 7, "PARTIALLY_FILLED")

        # POST /orders/batch: each placement answered on its own.
        results = await ready(alice.place_orders([
            pmx.OrderRequest(market, "BUY", "YES", 30, 1),
            pmx.OrderRequest(market, "BUY", "YES", 31, 1, client_order_id="batch-" + uuid.uuid4().hex),
            pmx.OrderRequest(market, "BUY", "YES", 0, 1),
        ]))
        assert [r.status for r in results] == [201, 201, 400]
        assert results[0].ok and results[0].order is not None and results[0].order.price == 30
        refused = results[2].error
        assert isinstance(refused, pmx.BadRequestError) and (refused.code, refused.field) == ("out_of_range", "price")
        first, second = results[0].order, results[1].order
        assert first is not None and second is not None

        # POST /cancel-order
        cancelled = await ready(alice.cancel_order(first.id))
        assert (cancelled.id, cancelled.status, cancelled.cancel_reason) == (first.id, "CANCELLED", "USER")

        # POST /orders/cancel: one cancelled, one refused.
        unknown = str(uuid.uuid4())
        bulk = await ready(alice.cancel_orders([second.id, unknown]))
        assert [o.id for o in bulk.cancelled] == [second.id]
        assert [(e.order_id, type(e.error), e.error.code) for e in bulk.errors] == [
            (unknown, pmx.NotFoundError, "order_not_found")]

        # GET /order, by id and by client order id
        got = await ready(alice.get_order(second.id))
        assert (got.id, got.status, got.client_order_id) == (second.id, "CANCELLED", second.client_order_id)
        got = await ready(alice.get_order(client_order_id=bid.client_order_id))
        assert got.id == bid.id

        # GET /order/queue-position and GET /orders/queue-positions: the bid alone at 41.
        pos = await ready(alice.get_queue_position(bid.id))
        assert isinstance(pos, pmx.QueuePosition)
        assert (pos.order_id, pos.market_id, pos.side, pos.outcome, pos.price, pos.ahead_quantity,
                pos.level_quantity) == (bid.id, market, "BUY", "YES", 41, 0, 3)
        many = await ready(alice.get_queue_positions([bid.id, second.id]))
        assert [p.order_id for p in many.positions] == [bid.id]
        assert [(e.order_id, type(e.error), e.error.code) for e in many.errors] == [
            (second.id, pmx.ConflictError, "order_not_open")]

        # GET /orders, one page and every page
        orders = await ready(alice.list_orders(market_id=market))
        assert {o.id for o in orders.orders} == {bid.id, first.id, second.id} and orders.next_cursor is None
        seen = []
        if flavour == "sync":
            for p in alice.pages(alice.list_orders, market_id=market, limit=2):
                seen += [o.id for o in p.orders]
        else:
            async for p in alice.pages(alice.list_orders, market_id=market, limit=2):
                seen += [o.id for o in p.orders]
        assert sorted(seen) == sorted(o.id for o in orders.orders)
        open_only = await ready(alice.list_orders(status="PARTIALLY_FILLED"))
        assert [o.id for o in open_only.orders] == [bid.id]

        # POST /heartbeat: arm, then disarm.
        before = dt.datetime.now(dt.timezone.utc)
        armed = await ready(alice.heartbeat(30))
        assert armed.armed and armed.deadline is not None
        assert before + dt.timedelta(seconds=25) < armed.deadline < before + dt.timedelta(seconds=60)
        disarmed = await ready(alice.heartbeat(0))
        assert (disarmed.armed, disarmed.deadline) == (False, None)

        # GET /market/events: gapless from 1 to the book's seq.
        book = await ready(alice.get_order_book(market))
        events = await ready(alice.get_market_events(market, after=0, limit=1000))
        assert events.market_id == market
        assert [e.seq for e in events.events] == list(range(1, book.seq + 1))
        assert [e.trade_id for e in events.events if e.type == "trade"] == [taker.trades[0].id]
        later = await ready(alice.get_market_events(market, after=book.seq))
        assert later.events == []

        # GET /account/events: the account's stream from pmx dev's one shard, gapless, and the
        # cursor after it.
        acct = await ready(alice.get_account_events())
        assert len({e.stream for e in acct.events}) == 1 and acct.cursor
        assert [e.seq for e in acct.events] == list(range(1, len(acct.events) + 1))
        assert acct.events[0].type == "accepted" and acct.events[0].order is not None
        assert acct.events[0].order.id == bid.id
        assert any(e.type == "fill" and e.fill is not None and e.fill.order_id == bid.id for e in acct.events)
        assert [e.fill.fee for e in acct.events if e.fill is not None] == [0]

        # GET /market/candles
        candles = await ready(alice.get_candles(market, "1m"))
        assert (candles.market_id, candles.interval) == (market, "1m") and candles.from_ < candles.to
        assert [(c.open, c.high, c.low, c.close, c.volume, c.trades) for c in candles.candles] == [(40, 40, 40, 40, 4, 1)]
        ranged = await ready(alice.get_candles(market, "1h", from_=candles.candles[0].start - dt.timedelta(hours=1),
                                               to=dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=1)))
        assert [c.volume for c in ranged.candles] == [4]

        # GET /account/limits
        limits = await ready(alice.get_account_limits())
        assert limits.reads.limited and limits.reads.per_second > 0 and limits.writes.burst > 0

        # GET /account/keys: the one key, never its secret.
        keys = await ready(alice.list_account_keys())
        assert [(k.scope, k.current, k.expires_at, k.ip_allowlist) for k in keys] == [("trade", True, None, [])]

        # GET and PUT /account/risk-limits: a BUY past a limit is refused, naming it.
        none = await ready(alice.get_risk_limits())
        assert (none.max_position, none.max_locked_cash) == (None, None)
        set_ = await ready(alice.set_risk_limits(max_position=1_000, max_locked_cash=0))
        assert (set_.max_position, set_.max_locked_cash) == (1_000, 0)
        assert (set_.used.position, set_.used.position_market_id, set_.used.position_outcome) == (7, market, "YES")
        assert set_.used.locked_cash == 41 * 3
        try:
            await ready(alice.place_order(market, "BUY", "YES", 1, 1))
            raise AssertionError("a BUY past maxLockedCash was accepted")
        except pmx.BadRequestError as e:
            assert (e.code, e.field) == ("risk_limit_exceeded", "maxLockedCash")
        cleared = await ready(alice.set_risk_limits())
        assert (cleared.max_position, cleared.max_locked_cash) == (None, None)

        # POST /ws-token
        token = await ready(alice.create_ws_token())
        assert token.token and token.expires_at > dt.datetime.now(dt.timezone.utc)

        # POST /cancel-everything: the amended bid is the last open order.
        everything_cancelled = await ready(alice.cancel_everything())
        assert [(o.id, o.status) for o in everything_cancelled] == [(bid.id, "PARTIALLY_FILLED_CANCELLED")]
        assert await ready(alice.cancel_everything()) == []
        assert (await ready(alice.get_account())).locked == 0

        # GET /settlements, after the market resolves YES.
        exchange.resolve(market, "YES")
        settled = await ready(alice.list_settlements())
        assert [(s.market_id, s.market_status, s.outcome, s.quantity, s.payout) for s in settled.settlements] == [
            (market, "RESOLVED", "YES", 4, 400)]
        bob_settled = await ready(bob.list_settlements(limit=5))
        assert [(s.outcome, s.payout) for s in bob_settled.settlements] == [("NO", 0)]
        assert await ready(alice.list_positions()) == []
        m = await ready(alice.get_market(market))
        assert (m.status, m.resolved, m.outcome) == ("RESOLVED", True, "YES")
        final = await ready(alice.get_account())
        assert final.available == GRANT - 4 * 40 + 400 and final.locked == 0

        # Order groups: make one, place into it, fill it to its limit, then the trigger's cancel and
        # refusal, and a reset.
        group = await ready(alice.create_order_group(3, 60))
        assert (group.fill_limit, group.window_seconds, group.filled_in_window, group.triggered) == (3, 60, 0, False)
        grouped = await ready(alice.place_order(grouped_market, "BUY", "YES", 30, 5, order_group_id=group.id))
        assert grouped.order_group_id == group.id
        await ready(bob.place_order(grouped_market, "BUY", "NO", 70, 3))
        triggered = await ready(alice.get_order_group(group.id))
        assert (triggered.triggered, triggered.filled_in_window) == (True, 3)
        gone = await ready(alice.get_order(grouped.id))
        assert (gone.status, gone.cancel_reason) == ("PARTIALLY_FILLED_CANCELLED", "ORDER_GROUP")
        try:
            await ready(alice.place_order(grouped_market, "BUY", "YES", 30, 1, order_group_id=group.id))
            raise AssertionError("a placement into a triggered group was accepted")
        except pmx.ConflictError as e:
            assert (e.code, e.field) == ("order_group_triggered", "orderGroupId")
        reset = await ready(alice.reset_order_group(group.id))
        assert (reset.triggered, reset.filled_in_window) == (False, 0)
        assert [g.id for g in await ready(alice.list_order_groups())] == [group.id]
        first = await ready(alice.list_order_groups(limit=1))
        assert isinstance(first, pmx.OrderGroupPage) and [g.id for g in first.order_groups] == [group.id]
        rest = await ready(alice.list_order_groups(limit=1, cursor=first.next_cursor))
        assert isinstance(rest, pmx.OrderGroupPage) and (rest.order_groups, rest.next_cursor) == ([], None)
        try:
            await ready(alice.get_order_group(str(uuid.uuid4())))
            raise AssertionError("an unknown group was found")
        except pmx.NotFoundError as e:
            assert e.code == "order_group_not_found"
        # A group an open order is in stays; with none, it is deleted, and then not found.
        kept = await ready(alice.place_order(grouped_market, "BUY", "YES", 10, 1, order_group_id=group.id))
        try:
            await ready(alice.delete_order_group(group.id))
            raise AssertionError("a group with an open order was deleted")
        except pmx.ConflictError as e:
            assert e.code == "order_group_has_open_orders"
        await ready(alice.cancel_order(kept.id))
        assert await ready(alice.delete_order_group(group.id)) is None
        assert await ready(alice.list_order_groups()) == []
        try:
            await ready(alice.delete_order_group(group.id))
            raise AssertionError("a deleted group was deleted again")
        except pmx.NotFoundError as e:
            assert e.code == "order_group_not_found"

        # Events: GET /events, GET /event, POST /event/convert. alice buys 3 NO of a and of b at 70
        # from bob's YES bids at 30; bob bids 20 for YES of c.
        newest = await ready(alice.list_events(status="OPEN", limit=1))
        assert isinstance(newest, pmx.EventPage) and [e.id for e in newest.events] == [event["id"]]
        listed = newest.events[0]
        assert [(o.key, o.market_id) for o in listed.outcomes] == [("a", event_markets[0]), ("b", event_markets[1]),
                                                                   ("c", event_markets[2])]
        assert (listed.status, listed.question, listed.resolution, listed.fees) == ("OPEN", f"Events ({flavour})?", None, None)
        assert (await ready(alice.list_events(status="RESOLVED"))).events == []
        for m in event_markets[:2]:
            await ready(bob.place_order(m, "BUY", "YES", 30, 3))
            bought = await ready(alice.place_order(m, "BUY", "NO", 70, 3))
            assert bought.status == "FILLED"
        await ready(bob.place_order(event_markets[2], "BUY", "YES", 20, 1))
        detail = await ready(alice.get_event(event["id"]))
        assert isinstance(detail, pmx.EventDetail) and detail.id == event["id"]
        assert [(o.key, o.best_bid, o.best_ask, o.last_price, o.yes_mid) for o in detail.outcomes] == [
            ("a", None, None, 30, 50.0), ("b", None, None, 30, 50.0), ("c", 20, None, None, 60.0)]
        assert detail.yes_mid_sum == 160.0 and detail.fees is None  # an event without fees
        before = await ready(alice.get_account())
        conv = await ready(alice.convert_event_shares(event["id"], ["a", "b"], 2))
        assert isinstance(conv, pmx.Conversion) and not conv.replayed
        assert (conv.event_id, conv.outcomes, conv.quantity, conv.cash) == (event["id"], ["a", "b"], 2, 200)
        assert conv.client_request_id is not None  # the SDK's, so that a retry is safe
        again = await ready(alice.convert_event_shares(event["id"], ["a", "b"], 2,
                                                       client_request_id=conv.client_request_id))
        assert again.replayed and again.id == conv.id
        assert (await ready(alice.get_account())).available == before.available + 200
        held = {(p.market_id, p.outcome): p.quantity for p in await ready(alice.list_positions())}
        assert (held[(event_markets[0], "NO")], held[(event_markets[1], "NO")]) == (1, 1)
        assert held[(event_markets[2], "YES")] == 2
        feed = await ready(alice.get_account_events())
        converted = [e.conversion for e in feed.events if e.type == "converted"]
        assert [c.id for c in converted if c is not None] == [conv.id]
        try:
            await ready(alice.convert_event_shares(event["id"], ["a"], 5))
            raise AssertionError("converting more NO shares than held was accepted")
        except pmx.BadRequestError as e:
            assert e.code == "insufficient_shares"
        try:
            await ready(alice.get_event(str(uuid.uuid4())))
            raise AssertionError("an unknown event was found")
        except pmx.NotFoundError as e:
            assert e.code == "event_not_found"

    run_with(flavour, exchange.url, alice_key, scenario)
