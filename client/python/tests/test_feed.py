"""The live feed through the SDK: subscriptions, seq tracking, resume after a forced disconnect,
gap detection, and every channel. Against the real exchange; failures come from a real proxy."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Callable

import pytest

import pmx
from faultproxy import FaultProxy
from pmxdev import PmxDev

WAIT = 30.0  # seconds any expected message may take, at most


def collect(feed: pmx.Feed, done: Callable[[list[Any]], bool], timeout: float = WAIT) -> list[Any]:
    """Messages from a sync feed until done(messages) holds; fails after timeout seconds."""
    msgs: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(msgs):
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"the feed did not deliver what was expected within {timeout} s; it delivered {msgs!r}")
        try:
            msgs.append(feed.recv(timeout=left))
        except TimeoutError:
            pass
    return msgs


async def acollect(feed: pmx.AsyncFeed, done: Callable[[list[Any]], bool], timeout: float = WAIT) -> list[Any]:
    msgs: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(msgs):
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"the feed did not deliver what was expected within {timeout} s; it delivered {msgs!r}")
        try:
            msgs.append(await feed.recv(timeout=left))
        except TimeoutError:
            pass
    return msgs


def book_seqs(msgs: list[Any], market: str) -> list[int]:
    return [e.seq for m in msgs if isinstance(m, pmx.MarketEvents) and m.channel == "book" and m.market_id == market
            for e in m.events]


def last_book(msgs: list[Any], market: str) -> int:
    """The last seq of the book events received (-1: none yet)."""
    return max([-1, *book_seqs(msgs, market)])


def last_account(msgs: list[Any]) -> int:
    return max([-1, *account_seqs(msgs)])


def account_last(c: pmx.Client) -> tuple[int, str]:
    """The last seq of the account's feed (pmx dev's one shard: one stream) and the cursor after it."""
    page = c.get_account_events(limit=1000)
    assert len({e.stream for e in page.events}) <= 1
    return max([0, *(e.seq for e in page.events)]), page.cursor


def account_seqs(msgs: list[Any], channel: str = "orders") -> list[int]:
    return [e.seq for m in msgs if isinstance(m, pmx.AccountEvents) and m.channel == channel for e in m.events]


def fold(snapshot: pmx.BookSnapshot, msgs: list[Any]) -> tuple[dict[int, int], dict[int, int]]:
    """The YES book (price → quantity) after applying the book events to the snapshot."""
    bids = {lvl.price: lvl.quantity for lvl in snapshot.bids}
    asks = {lvl.price: lvl.quantity for lvl in snapshot.asks}
    for m in msgs:
        if isinstance(m, pmx.MarketEvents) and m.channel == "book":
            for e in m.events:
                if e.type == "level":
                    assert e.price is not None
                    side = bids if e.side == "bid" else asks
                    if e.quantity:
                        side[e.price] = e.quantity
                    else:
                        side.pop(e.price, None)
    return bids, asks


def rest_book(c: pmx.Client, market: str) -> tuple[int, dict[int, int], dict[int, int]]:
    book = c.get_order_book(market)
    return (book.seq, {lvl.price: lvl.quantity for lvl in book.order_book_yes.bids},
            {lvl.price: lvl.quantity for lvl in book.order_book_yes.asks})


def test_book_and_orders_are_followed_without_gaps(exchange: PmxDev, key: str, other_key: str, market: str) -> None:
    with pmx.Client(exchange.url, key) as c, pmx.Client(exchange.url, other_key) as other, c.feed() as feed:
        ack = feed.subscribe("book", market)
        assert (ack.channel, ack.market_id) == ("book", market)
        orders_ack = feed.subscribe("orders")
        assert orders_ack.seq == 0  # a fresh account: its events start at 1
        first = collect(feed, lambda ms: len(ms) >= 1)
        snapshot = first[0]
        assert isinstance(snapshot, pmx.BookSnapshot) and snapshot.market_id == market and snapshot.status == "OPEN"
        assert feed.last_seq("book", market) == snapshot.seq

        mine = [c.place_order(market, "BUY", "YES", 40 + i, 5) for i in range(3)]
        other.place_order(market, "BUY", "NO", 58, 7)  # a YES ask at 42: takes my bid at 42, rests 2
        c.amend_order(mine[0].id, quantity=2)
        c.cancel_order(mine[1].id)
        target, bids, asks = rest_book(c, market)
        acct, cursor = account_last(c)
        msgs = first + collect(feed, lambda ms: last_book(ms, market) == target and last_account(ms) == acct)
        assert (feed.last_seq("book", market), feed.last_cursor("orders")) == (target, cursor)

        assert book_seqs(msgs, market) == list(range(snapshot.seq + 1, target + 1))
        assert account_seqs(msgs) == list(range(1, acct + 1))
        assert fold(snapshot, msgs) == (bids, asks)
        kinds = [e.type for m in msgs if isinstance(m, pmx.AccountEvents) for e in m.events]
        assert kinds[:3] == ["accepted"] * 3 and "amended" in kinds and "cancelled" in kinds
        assert feed.reconnects == 0 and feed.gaps == 0


def test_a_cut_connection_resumes_from_the_last_seq(exchange: PmxDev, proxy: FaultProxy, key: str, market: str) -> None:
    with pmx.Client(exchange.url, key) as c, pmx.Client(proxy.url, key) as via_proxy, via_proxy.feed() as feed:
        feed.subscribe("book", market)
        feed.subscribe("orders")
        for i in range(3):
            c.place_order(market, "BUY", "YES", 30 + i, 1)
        before, _, _ = rest_book(c, market)
        msgs = collect(feed, lambda ms: last_book(ms, market) == before)

        # The network fails: connections are cut, and new ones refused for a while, during which
        # the market and the account change.
        proxy.refuse(True)
        assert proxy.cut_all() == 1
        for i in range(3):
            c.place_order(market, "BUY", "NO", 50 + i, 1)
        missed, bids, asks = rest_book(c, market)
        acct, _ = account_last(c)
        proxy.refuse(False)

        msgs += collect(feed, lambda ms: last_book(ms, market) == missed and last_account(ms) == acct)
        snapshot = msgs[0]
        assert isinstance(snapshot, pmx.BookSnapshot)
        assert book_seqs(msgs, market) == list(range(snapshot.seq + 1, missed + 1))  # no gap, no duplicate
        assert account_seqs(msgs) == list(range(1, acct + 1))
        assert fold(snapshot, msgs) == (bids, asks)
        # The events of the outage came after the reconnection, replayed from resumeFrom.
        reconnected = [i for i, m in enumerate(msgs) if isinstance(m, pmx.Reconnected)]
        assert len(reconnected) == 1 and feed.reconnects == 1 and feed.gaps == 0
        assert book_seqs(msgs[reconnected[0]:], market) == list(range(before + 1, missed + 1))
        assert not any(isinstance(m, pmx.BookSnapshot) for m in msgs[1:])  # resumed, not restarted


def test_a_missing_event_is_detected_and_filled(exchange: PmxDev, proxy: FaultProxy, key: str, market: str) -> None:
    async def main() -> None:
        async with pmx.AsyncClient(exchange.url, key) as c, pmx.AsyncClient(proxy.url, key) as via_proxy:
            async with via_proxy.feed() as feed:
                await feed.subscribe("book", market)
                msgs = await acollect(feed, lambda ms: len(ms) >= 1)
                snapshot = msgs[0]
                assert isinstance(snapshot, pmx.BookSnapshot)
                # The next book events the exchange sends for this market never arrive.
                needle = market.encode()
                proxy.drop_ws_message(lambda p: b'"type":"events"' in p and b'"channel":"book"' in p and needle in p)
                for i in range(4):
                    await c.place_order(market, "BUY", "NO", 40 + i, 1)
                target = (await c.get_order_book(market)).seq
                msgs += await acollect(feed, lambda ms: last_book(ms, market) == target)

                assert proxy.dropped_ws == 1
                gaps = [m for m in msgs if isinstance(m, pmx.GapDetected)]
                assert len(gaps) == 1 and feed.gaps == 1
                gap = gaps[0]
                assert (gap.channel, gap.market_id, gap.expected) == ("book", market, snapshot.seq + 1)
                assert gap.got > gap.expected
                kinds = [type(m).__name__ for m in msgs if isinstance(m, (pmx.GapDetected, pmx.Reconnected))]
                assert kinds == ["GapDetected", "Reconnected"]
                assert book_seqs(msgs, market) == list(range(snapshot.seq + 1, target + 1))

    asyncio.run(main())


def test_every_channel(exchange: PmxDev, key: str, other_key: str, market: str) -> None:
    async def main() -> None:
        async with pmx.AsyncClient(exchange.url, key) as c, pmx.AsyncClient(exchange.url, other_key) as other:
            async with c.feed() as feed:
                await feed.subscribe("trades", market)
                await feed.subscribe("ticker", market)
                fills_ack = await feed.subscribe("fills")
                assert fills_ack.seq == 0
                await feed.subscribe("lifecycle")
                msgs = await acollect(feed, lambda ms: any(isinstance(m, pmx.Ticker) for m in ms))
                ticker = next(m for m in msgs if isinstance(m, pmx.Ticker))
                assert (ticker.market_id, ticker.best_bid, ticker.best_ask, ticker.last_price) == (market, None, None, None)

                await other.place_order(market, "BUY", "YES", 45, 3)  # a YES bid at 45
                placed = await c.place_order(market, "BUY", "NO", 55, 2)  # a YES ask at 45: it trades
                assert [t.quantity for t in placed.trades] == [2]

                def seen(ms: list[Any]) -> bool:
                    return (any(isinstance(m, pmx.MarketEvents) and m.channel == "trades" for m in ms)
                            and any(isinstance(m, pmx.AccountEvents) and m.channel == "fills" for m in ms)
                            and any(isinstance(m, pmx.Ticker) and m.last_price == 45 for m in ms))

                msgs += await acollect(feed, seen)
                exchange.close_market(market)
                # The lifecycle channel may still bring the market's "listed" change (made just
                # before the subscription) ahead of its close: wait for the close itself.
                msgs += await acollect(feed, lambda ms: any(isinstance(m, pmx.MarketChange) and m.market_id == market
                                                            and m.change == "status" for m in ms))
                trades = [e for m in msgs if isinstance(m, pmx.MarketEvents) for e in m.events]
                assert [(e.type, e.trade_id, e.price, e.quantity, e.taker_side, e.taker_outcome) for e in trades] == [
                    ("trade", placed.trades[0].id, 45, 2, "BUY", "NO")]
                fills = [e for m in msgs if isinstance(m, pmx.AccountEvents) for e in m.events]
                assert [(e.type, e.fill.order_id, e.fill.role, e.fill.price, e.status) for e in fills if e.fill] == [
                    ("fill", placed.id, "TAKER", 55, "FILLED")]
                assert all(e.type == "fill" for e in fills)
                traded = next(m for m in msgs if isinstance(m, pmx.Ticker) and m.last_price == 45)
                assert (traded.best_bid, traded.best_ask) == (45, None)
                change = next(m for m in msgs if isinstance(m, pmx.MarketChange) and m.market_id == market
                              and m.change == "status")
                assert (change.change, change.status) == ("status", "CLOSED")

    asyncio.run(main())


def test_unsubscribed_channels_go_quiet(exchange: PmxDev, key: str, market: str) -> None:
    with pmx.Client(exchange.url, key) as c, c.feed() as feed:
        feed.subscribe("book", market)
        feed.subscribe("ticker", market)
        collect(feed, lambda ms: any(isinstance(m, pmx.BookSnapshot) for m in ms)
                and any(isinstance(m, pmx.Ticker) for m in ms))
        feed.unsubscribe("book", market)
        assert feed.last_seq("book", market) is None
        c.place_order(market, "BUY", "YES", 20, 1)
        # The ticker's change comes after the book's events would have: none of them came.
        msgs = collect(feed, lambda ms: any(isinstance(m, pmx.Ticker) and m.best_bid == 20 for m in ms))
        assert [m for m in msgs if not isinstance(m, pmx.Ticker)] == []
        with pytest.raises(pmx.SubscriptionError) as info:
            feed.unsubscribe("book", market)
        assert info.value.code == "not_subscribed"


def test_a_later_feed_resumes_where_an_earlier_stopped(exchange: PmxDev, key: str, market: str) -> None:
    with pmx.Client(exchange.url, key) as c:
        with c.feed() as feed:
            feed.subscribe("book", market)
            c.place_order(market, "BUY", "YES", 10, 1)
            seq = c.get_order_book(market).seq
            collect(feed, lambda ms: last_book(ms, market) == seq)
            kept = feed.last_seq("book", market)
        c.place_order(market, "BUY", "YES", 11, 1)
        c.place_order(market, "BUY", "YES", 12, 1)
        target = c.get_order_book(market).seq
        with c.feed() as feed:
            feed.subscribe("book", market, resume_from=kept)
            msgs = collect(feed, lambda ms: last_book(ms, market) == target)
        assert kept is not None
        assert not any(isinstance(m, pmx.BookSnapshot) for m in msgs)
        assert book_seqs(msgs, market) == list(range(kept + 1, target + 1))


def test_refusals(exchange: PmxDev, key: str, market: str) -> None:
    async def main() -> None:
        async with pmx.AsyncClient(exchange.url, key) as c, c.feed() as feed:
            with pytest.raises(pmx.SubscriptionError) as info:
                await feed.subscribe("book", str(uuid.uuid4()))
            assert info.value.code == "unknown_market"
            with pytest.raises(pmx.SubscriptionError) as info:
                await feed.subscribe("book", market, resume_from=10**9)
            assert info.value.code == "invalid_resume_from"
            await feed.subscribe("book", market)
            with pytest.raises(pmx.SubscriptionError) as info:
                await feed.subscribe("book", market)
            assert info.value.code == "already_subscribed"
            with pytest.raises(ValueError):
                await feed.subscribe("orders", market)
        async with pmx.AsyncClient(exchange.url, "pmx_not_a_real_key") as bad:
            with pytest.raises(pmx.FeedError, match="refused the feed's API key"):
                async with bad.feed():
                    pass

    asyncio.run(main())


def test_pings_keep_a_quiet_feed_alive_and_silence_replaces_it(exchange: PmxDev, key: str, market: str) -> None:
    # The exchange's heartbeats come every 10 s: on a quiet market, only the answers to the
    # feed's own pings arrive within a shorter silence_timeout.
    with pmx.Client(exchange.url, key) as c:
        with c.feed(pmx.FeedOptions(ping_interval=0.2, silence_timeout=2.0, heartbeats=True)) as feed:
            feed.subscribe("book", market)
            assert isinstance(feed.recv(timeout=WAIT), pmx.BookSnapshot)
            # Nothing but the exchange's heartbeat (within 10 s), and above all no Reconnected.
            msg = feed.recv(timeout=WAIT)
            assert isinstance(msg, pmx.Heartbeat) and msg.at.tzinfo is not None, msg
            assert feed.reconnects == 0
        with c.feed(pmx.FeedOptions(ping_interval=60, silence_timeout=1.0)) as feed:
            feed.subscribe("book", market)
            assert isinstance(feed.recv(timeout=WAIT), pmx.BookSnapshot)
            msg = feed.recv(timeout=WAIT)
            assert isinstance(msg, pmx.Reconnected) and "no message from the exchange in 1.0 s" in msg.reason
            c.place_order(market, "BUY", "YES", 15, 1)
            seq = c.get_order_book(market).seq
            msgs = collect(feed, lambda ms: last_book(ms, market) == seq)
            assert not any(isinstance(m, pmx.BookSnapshot) for m in msgs)  # resumed


def test_cancel_on_disconnect(exchange: PmxDev, key: str, market: str) -> None:
    with pmx.Client(exchange.url, key) as c:
        with c.feed(pmx.FeedOptions(cancel_on_disconnect=True)) as feed:
            feed.subscribe("orders")
            order = c.place_order(market, "BUY", "YES", 5, 1)
            assert c.get_order(order.id).status == "OPEN"
        deadline = time.monotonic() + WAIT
        while (got := c.get_order(order.id)).status == "OPEN":
            assert time.monotonic() < deadline, "the order outlived its feed connection"
            time.sleep(0.05)
        assert (got.status, got.cancel_reason) == ("CANCELLED", "HEARTBEAT")


def test_orders_resume_from_a_cursor(exchange: PmxDev, key: str, market: str) -> None:
    """The account feed's place is a cursor: every message carries the one after it, a new feed
    resumes from any of them with the events after it, and a seq of the feed's first form is
    refused (outdated_cursor) with how to resume."""
    with pmx.Client(exchange.url, key) as c:
        with c.feed() as feed:
            start = feed.subscribe("orders").cursor
            assert start is not None and start.startswith("v2.")
            for i in range(3):
                c.place_order(market, "BUY", "YES", 30 + i, 1)
            msgs = collect(feed, lambda ms: len(account_seqs(ms)) >= 3)
            cursors = [m.cursor for m in msgs if isinstance(m, pmx.AccountEvents)]
            assert all(cur.startswith("v2.") for cur in cursors)
            assert feed.last_cursor("orders") == cursors[-1]
            seqs = account_seqs(msgs)
        page = c.get_account_events(after=start)
        assert [e.seq for e in page.events] == seqs and page.cursor == cursors[-1]
        first = msgs[0]
        assert isinstance(first, pmx.AccountEvents)
        with c.feed() as again:
            again.subscribe("orders", resume_from=first.cursor)
            replayed = collect(again, lambda ms: len(account_seqs(ms)) >= len(seqs) - len(first.events))
            assert account_seqs(replayed) == seqs[len(first.events):]
            with pytest.raises(pmx.SubscriptionError) as info:
                again.subscribe("fills", resume_from=seqs[0])
            assert info.value.code == "outdated_cursor" and "cursor" in info.value.message
        with pytest.raises(pmx.ApiError) as err:
            c.get_account_events(after="1")
        assert err.value.code == "outdated_cursor"
