"""The live feed: one WebSocket (``GET /api/v1/ws``) that follows markets and your account.

:class:`AsyncFeed` holds the logic; :class:`Feed` is the same feed for synchronous code, run on an
event loop in a thread of its own. Both keep, for every subscription, the last ``seq`` they
delivered, and guarantee the consumer a sequence without gaps or duplicates:

- **Duplicates** (an event at or below the last seq, as a resume may replay) are dropped.
- **Gaps**: on ``book`` (every event of a market) and ``orders`` (every event of your account) each
  event must be the one after the last (on ``orders``, the last of its stream: your account's feed
  is one stream per shard, each event naming its ``stream`` and ``seq``). If one is missing, the
  feed delivers a :class:`GapDetected` notice, drops the connection and resumes.
- **Resume**: after any lost connection (cut, server restart, close code 4001/4002/4003, no
  heartbeat for ``silence_timeout``) it reconnects with back-off and subscribes again with
  ``resumeFrom`` = the last seq delivered (on ``orders`` and ``fills``, the ``cursor`` of the last
  message queued), so the events in between are replayed first, then the live ones follow. It delivers a :class:`Reconnected` notice before them. If the exchange no
  longer keeps those events (``resync_required``), it subscribes afresh (``book`` starts again
  with a snapshot) and delivers a :class:`Resynced` notice: rebuild your state then.
- **The key's end**: a connection closed because its API key was revoked or expired (close code
  4004) ends the feed with :class:`FeedError`: the exchange refuses the key from then on.

``trades`` and ``fills`` carry only some of the sequence's numbers, so they are resumed and
deduplicated but cannot show a gap; ``ticker`` and ``lifecycle`` are live only and are subscribed
again after a reconnect (what changed meanwhile is in the REST API).

The feed pings the exchange every ``ping_interval`` seconds (the exchange closes a connection
silent for 60 s). Messages wait for the consumer in a queue of ``queue_size``; a consumer that lets
it fill stops the feed reading, the exchange then closes the connection as a slow consumer, and
the feed resumes once there is room: memory stays bounded and nothing is lost.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import importlib
import json
import random
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Optional, Union

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from . import errors, signing
from .models import AccountEvent, Channel, MarketEvent, MarketStatus, decode


def _connector() -> tuple[Callable[..., Any], str]:
    """websockets' asyncio connect and the name of its headers argument: the implementation of
    websockets 13 and later, else the one before (Debian bookworm has 10.4)."""
    try:
        return importlib.import_module("websockets.asyncio.client").connect, "additional_headers"
    except ImportError:
        return importlib.import_module("websockets.client").connect, "extra_headers"


_ws_connect, _HEADERS = _connector()


__all__ = [
    "FeedOptions", "AsyncFeed", "Feed", "FeedMessage", "Subscribed", "FeedLevel", "BookSnapshot",
    "MarketEvents", "Ticker", "MarketChange", "AccountEvents", "Heartbeat", "Reconnected",
    "GapDetected", "Resynced", "SubscriptionLost",
]


@dataclass(frozen=True)
class FeedOptions:
    """How the feed connects, keeps alive and resumes."""

    #: Reconnect and resume after a lost connection (else the feed ends with a FeedError).
    reconnect: bool = True
    #: Seconds between the feed's pings (the exchange closes a connection silent for 60 s).
    ping_interval: float = 20.0
    #: Seconds without any message (the exchange sends a heartbeat every 10 s) after which the
    #: connection is taken for dead and replaced.
    silence_timeout: float = 30.0
    #: Back-off between reconnection attempts: up to base × 2^(n−1), at most max, with jitter.
    backoff_base: float = 0.1
    backoff_max: float = 5.0
    #: Failed reconnection attempts in a row before the feed gives up; None: never.
    max_reconnect_attempts: Optional[int] = None
    #: Messages waiting for the consumer at most (see the module's documentation).
    queue_size: int = 4096
    #: Connect with ?cancelOnDisconnect=true: the account's open orders are cancelled when its
    #: last such connection closes.
    cancel_on_disconnect: bool = False
    #: Seconds to open a connection (the TCP and WebSocket handshakes).
    open_timeout: float = 10.0
    #: Deliver the exchange's heartbeats as :class:`Heartbeat` messages.
    heartbeats: bool = False


# --- Messages -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscribed:
    """The exchange's answer to a subscription. ``cursor``: on ``orders`` and ``fills``, where in
    the account's feed the events that follow come after (``seq``: the same as a number while the
    feed is the one stream ``""``; deprecated)."""

    channel: Channel
    market_id: Optional[str] = None
    seq: Optional[int] = None
    cursor: Optional[str] = None


@dataclass(frozen=True)
class FeedLevel:
    price: int
    quantity: int


@dataclass(frozen=True)
class BookSnapshot:
    """A market's whole book in YES terms as of ``seq``: the first message of a ``book``
    subscription that does not resume (and of one that had to start again)."""

    market_id: str
    seq: int
    status: MarketStatus
    bids: list[FeedLevel]
    asks: list[FeedLevel]
    last_price: Optional[int]


@dataclass(frozen=True)
class MarketEvents:
    """A market's events, in order (``book``: every one; ``trades``: the trades)."""

    channel: Literal["book", "trades"]
    market_id: str
    events: list[MarketEvent]


@dataclass(frozen=True)
class Ticker:
    market_id: str
    seq: int
    best_bid: Optional[int]
    best_ask: Optional[int]
    last_price: Optional[int]


@dataclass(frozen=True)
class MarketChange:
    """``lifecycle``: a new market (``listed``), a market's new ``status``, or trading in it
    ``halted`` (without closing: ``halted`` says by what) or ``resumed``."""

    market_id: str
    change: Literal["listed", "status", "halted", "resumed"]
    status: MarketStatus
    seq: int
    at: _dt.datetime
    #: The event whose outcome the market answers (``None`` for a market of its own): an event's
    #: status change arrives as one ``status`` message per market of the event, each naming it.
    event_id: Optional[str] = None
    #: While trading in the market is halted: ``market`` (its own pause), ``event`` or
    #: ``exchange``; ``None`` otherwise.
    halted: Optional[str] = None


@dataclass(frozen=True)
class AccountEvents:
    """Your account's events, in order (``orders``: every one; ``fills``: the fills), and the
    ``cursor`` after them: what to resume from."""

    channel: Literal["orders", "fills"]
    events: list[AccountEvent]
    cursor: str = ""


@dataclass(frozen=True)
class Heartbeat:
    at: _dt.datetime


@dataclass(frozen=True)
class Reconnected:
    """The feed lost its connection (``reason``) and has a new one, after ``attempts`` tries;
    its subscriptions resume from the last seq delivered (the replayed events follow)."""

    reason: str
    attempts: int


@dataclass(frozen=True)
class GapDetected:
    """An event was missing: ``got`` came where ``expected`` should have. The feed reconnects
    and resumes from ``expected − 1``; the consumer sees the missing events next."""

    channel: Channel
    market_id: Optional[str]
    expected: int
    got: int


@dataclass(frozen=True)
class Resynced:
    """A subscription could not resume (``code``, e.g. ``resync_required``: its events are past
    retention) and started again: a ``book`` with a new snapshot, ``orders`` from the account's
    current seq. Rebuild what you kept from it (the REST API has the current state)."""

    channel: Channel
    market_id: Optional[str]
    code: str
    message: str


@dataclass(frozen=True)
class SubscriptionLost:
    """The exchange refused to resume a subscription (``code``) after a reconnect; it has ended."""

    channel: Channel
    market_id: Optional[str]
    code: str
    message: str


FeedMessage = Union[BookSnapshot, MarketEvents, Ticker, MarketChange, AccountEvents, Heartbeat,
                    Reconnected, GapDetected, Resynced, SubscriptionLost]

# Channels whose every event follows the last one (gap detection), and those that resume.
_STRICT = {"book", "orders"}
_RESUMABLE = {"book", "trades", "orders", "fills"}
_MARKET_CHANNELS = {"book", "trades", "ticker"}
_ACCOUNT_CHANNELS = {"orders", "fills"}


class _Stream:
    """One subscription: what the feed sends to the exchange and the last seq it delivered."""

    def __init__(self, channel: str, market_id: Optional[str], last: Union[int, str, None]) -> None:
        self.channel, self.market_id = channel, market_id
        # last: the last seq queued for the consumer (what a reconnection resumes from);
        # delivered: the last seq the consumer has received (what last_seq() tells).
        # On orders and fills: cursor, the cursor after the last message queued (what a
        # reconnection resumes from), delivered_cursor the consumer's (last_cursor()), and the
        # last seq queued of each stream of the account's feed.
        self.cursor: Optional[str] = None
        self.delivered_cursor: Optional[str] = None
        self.seqs: dict[str, int] = {}
        seq: Optional[int] = None
        if channel in _ACCOUNT_CHANNELS:
            if last is not None:
                self.cursor = self.delivered_cursor = str(last)
        elif isinstance(last, int):
            seq = last
        self.last: Optional[int] = seq
        self.delivered: Optional[int] = seq
        self.waiter: Optional[asyncio.Future[Subscribed]] = None

    @property
    def key(self) -> tuple[str, Optional[str]]:
        return (self.channel, self.market_id)


class _End:
    pass


_END = _End()


class _Fatal(Exception):
    pass


# The close code of a connection whose API key was revoked or expired.
_CLOSE_KEY_ENDED = 4004


def _describe_close(e: ConnectionClosed) -> str:
    rcvd = getattr(e, "rcvd", None)
    if rcvd is not None:
        return f"closed by the exchange with code {rcvd.code}" + (f" ({rcvd.reason})" if rcvd.reason else "")
    return "the connection was lost"


class AsyncFeed:
    """The live feed for asyncio. Get one from :meth:`pmx.AsyncClient.feed`::

        async with client.feed() as feed:
            await feed.subscribe("book", market_id)
            async for msg in feed:
                ...
    """

    def __init__(self, url: str, api_key: str, options: FeedOptions = FeedOptions(),
                 signer: Optional[signing.Signer] = None) -> None:
        self.url = url + ("?cancelOnDisconnect=true" if options.cancel_on_disconnect else "")
        self.options = options
        self._key = api_key
        self._signer = signer
        self._streams: dict[tuple[str, Optional[str]], _Stream] = {}
        self._ids: dict[int, _Stream] = {}  # subscription ids in flight → their stream
        self._unsubs: dict[int, asyncio.Future[None]] = {}
        self._next_id = 0
        self._queue: Optional[asyncio.Queue[Any]] = None
        self._ws: Any = None
        self._runner: Optional[asyncio.Task[None]] = None
        self._closed = False
        self._silent = False
        self._last_rx = 0.0
        #: How many times the feed reconnected, and how many gaps it found.
        self.reconnects = 0
        self.gaps = 0

    # --- the consumer's side ------------------------------------------------------------

    async def __aenter__(self) -> "AsyncFeed":
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def connect(self) -> None:
        """Opens the connection (a refused key raises :class:`~pmx.errors.FeedError` here)."""
        if self._runner is not None:
            return
        self._queue = asyncio.Queue(self.options.queue_size)
        for attempt in range(1, 6):
            try:
                self._ws = await self._open()
                break
            except _Fatal as e:
                raise errors.FeedError(str(e)) from None
            except _RateLimited as e:  # the connection counts as a read of the account
                if attempt == 5:
                    raise errors.FeedError("the feed's connection was rate limited (HTTP 429) 5 times: "
                                           "see GET /api/v1/account/limits") from None
                await asyncio.sleep(e.retry_after if e.retry_after is not None else 1.0)
            except Exception as e:
                raise errors.FeedError(f"could not connect the feed to {self.url} ({e!r}): is the exchange running there?") from None
        self._runner = asyncio.create_task(self._run(), name="pmx-feed")

    async def subscribe(self, channel: Channel, market_id: Optional[str] = None, *,
                        resume_from: Union[int, str, None] = None, timeout: float = 30.0) -> Subscribed:
        """Subscribes to ``channel`` (of ``market_id`` for book, trades and ticker) and waits for
        the answer; a refusal raises :class:`~pmx.errors.SubscriptionError`. ``resume_from``:
        the last seq you applied (e.g. kept from an earlier run), or on ``orders`` and ``fills``
        the last cursor (:meth:`last_cursor`); the events after it come first."""
        if self._runner is None:
            raise errors.FeedError("the feed is not connected: use it as a context manager or call connect()")
        if (channel in _MARKET_CHANNELS) != (market_id is not None):
            raise ValueError(f"the {channel} channel {'needs' if channel in _MARKET_CHANNELS else 'takes no'} market_id")
        key = (channel, market_id)
        if key in self._streams:
            raise errors.SubscriptionError("already_subscribed", "this feed already follows it", channel, market_id)
        stream = _Stream(channel, market_id, resume_from)
        stream.waiter = asyncio.get_running_loop().create_future()
        self._streams[key] = stream
        await self._send_subscribe(self._ws, stream)
        try:
            return await asyncio.wait_for(asyncio.shield(stream.waiter), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no answer to the subscription to {channel} within {timeout} s") from None

    async def unsubscribe(self, channel: Channel, market_id: Optional[str] = None, *, timeout: float = 30.0) -> None:
        """Ends a subscription; no more of its messages are delivered."""
        stream = self._streams.pop((channel, market_id), None)
        if stream is None:
            raise errors.SubscriptionError("not_subscribed", "this feed does not follow it", channel, market_id)
        sid = self._new_id()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._unsubs[sid] = fut
        msg = {"op": "unsubscribe", "id": sid, "channel": channel}
        if market_id is not None:
            msg["marketId"] = market_id
        if await self._send(self._ws, msg):
            try:
                await asyncio.wait_for(fut, timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(f"no answer to the unsubscription from {channel} within {timeout} s") from None
        self._unsubs.pop(sid, None)

    def last_seq(self, channel: Channel, market_id: Optional[str] = None) -> Optional[int]:
        """The seq of the last message of a subscription that the consumer has received (from
        :meth:`recv` or iterating): keep it to resume from it later (``resume_from``). On
        ``orders`` and ``fills``, keep :meth:`last_cursor` instead."""
        stream = self._streams.get((channel, market_id))
        return stream.delivered if stream is not None else None

    def last_cursor(self, channel: Channel) -> Optional[str]:
        """On ``orders`` and ``fills``: the cursor after the last message the consumer has
        received (or of the subscription's answer): keep it to resume from it later
        (``resume_from``)."""
        stream = self._streams.get((channel, None))
        return stream.delivered_cursor if stream is not None else None

    async def recv(self, timeout: Optional[float] = None) -> FeedMessage:
        """The next message; ``TimeoutError`` if none comes within ``timeout`` seconds.
        Raises :class:`~pmx.errors.FeedError` if the feed failed, StopAsyncIteration once closed."""
        if self._queue is None:
            raise errors.FeedError("the feed is not connected: use it as a context manager or call connect()")
        if timeout is None:
            item = await self._queue.get()
        else:
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout)
            except asyncio.TimeoutError:
                raise TimeoutError(f"no feed message within {timeout} s") from None
        if isinstance(item, _End) or isinstance(item, BaseException):
            self._queue.put_nowait(item)  # for every later call too
            if isinstance(item, _End):
                raise StopAsyncIteration
            raise item
        self._mark_delivered(item)
        return item  # type: ignore[no-any-return]

    def _mark_delivered(self, item: Any) -> None:
        if isinstance(item, AccountEvents):
            account = self._streams.get((item.channel, None))
            if account is not None:
                account.delivered = item.events[-1].seq
                if item.cursor:  # none on the events before a gap: the resume replays them
                    account.delivered_cursor = item.cursor
            return
        if isinstance(item, (MarketEvents, AccountEvents)):
            key: tuple[str, Optional[str]] = (item.channel, getattr(item, "market_id", None))
            seq = item.events[-1].seq
        elif isinstance(item, BookSnapshot):
            key, seq = ("book", item.market_id), item.seq
        elif isinstance(item, Ticker):
            key, seq = ("ticker", item.market_id), item.seq
        else:
            return
        stream = self._streams.get(key)
        if stream is not None:
            stream.delivered = seq

    def __aiter__(self) -> "AsyncFeed":
        return self

    async def __anext__(self) -> FeedMessage:
        return await self.recv()

    async def close(self) -> None:
        """Closes the connection; iterating then ends."""
        if self._closed:
            return
        self._closed = True
        # Closing the connection ends the reader's recv(); the cancel is a backstop.
        if self._ws is not None:
            try:
                await asyncio.wait_for(self._ws.close(), 5)
            except Exception:
                pass
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.wait({self._runner}, timeout=5)
        self._fail_waiters(errors.FeedError("the feed was closed"))
        if self._queue is not None:
            self._drop_one_if_full()
            self._queue.put_nowait(_END)

    # --- the connection -----------------------------------------------------------------

    async def _open(self) -> Any:
        """Opens a connection. Raises _Fatal when trying again cannot help, else the error."""
        sent = {"Authorization": signing.authorization(self._key, self._signer)}
        if self._signer is not None:  # the upgrade is signed like any request, afresh each time
            parts = urllib.parse.urlsplit(self.url)
            sent.update(self._signer.headers("GET", parts.path + ("?" + parts.query if parts.query else "")))
        kwargs: dict[str, Any] = {
            _HEADERS: sent,
            "open_timeout": self.options.open_timeout, "close_timeout": 2, "ping_interval": None,
            "compression": None, "max_size": 16 << 20,
        }
        try:
            return await _ws_connect(self.url, **kwargs)
        except InvalidURI as e:
            raise _Fatal(f"the feed's URL is not valid: {e}") from None
        except InvalidHandshake as e:
            status = getattr(e, "status_code", None)
            headers = getattr(e, "headers", None)
            response = getattr(e, "response", None)  # websockets 13+
            if status is None and response is not None:
                status, headers = response.status_code, response.headers
            if status in (401, 403):
                raise _Fatal(f"the exchange refused the feed's API key (HTTP {status}): use a valid key "
                             "from the exchange's /settings page") from None
            if status == 429:
                raise _RateLimited(errors.parse_retry_after(headers.get("Retry-After") if headers else None)) from None
            if status is not None and 400 <= status < 500:
                raise _Fatal(f"the exchange refused the feed's connection (HTTP {status}) at {self.url}") from None
            raise

    async def _run(self) -> None:
        try:
            while True:
                reason = await self._pump(self._ws)
                if self._closed:
                    return
                if not self.options.reconnect:
                    raise errors.FeedError(f"the feed's connection ended ({reason}) and reconnect is off")
                self._ws = await self._reconnect(reason)
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # the feed is over: tell the consumer
            err = e if isinstance(e, errors.PmxError) else errors.FeedError(f"the feed failed: {e!r}")
            self._fail_waiters(err)
            assert self._queue is not None
            self._drop_one_if_full()
            self._queue.put_nowait(err)

    async def _pump(self, ws: Any) -> str:
        """Reads one connection until it ends; returns why it ended."""
        self._silent = False
        self._last_rx = asyncio.get_running_loop().time()
        helpers = [asyncio.create_task(self._ping(ws)), asyncio.create_task(self._watch(ws))]
        try:
            while not self._closed:
                try:
                    # No wait_for here: on Python 3.11 it can swallow a cancellation that comes
                    # as a message does. Silence is the watchdog's business.
                    raw = await ws.recv()
                except ConnectionClosed as e:
                    if self._silent:
                        return f"no message from the exchange in {self.options.silence_timeout} s"
                    rcvd = getattr(e, "rcvd", None)
                    if rcvd is not None and rcvd.code == _CLOSE_KEY_ENDED:
                        # Every connection with the key is refused from now on: reconnecting
                        # cannot help.
                        raise errors.FeedError(f"the feed's API key was revoked or expired ({rcvd.reason}): "
                                               "use another key") from None
                    return _describe_close(e)
                self._last_rx = asyncio.get_running_loop().time()
                try:
                    msg = json.loads(raw)
                except ValueError:
                    return f"the exchange sent a message that is not JSON: {str(raw)[:100]!r}"
                if not isinstance(msg, dict):
                    continue
                heal = await self._handle(msg)
                if heal is not None:
                    return heal
            return "the feed was closed"
        finally:
            for task in helpers:
                task.cancel()
            # Whatever ended the reading, this connection is done with (a gap, a silent peer).
            try:
                await asyncio.wait_for(ws.close(), 3)
            except Exception:
                pass

    async def _watch(self, ws: Any) -> None:
        """Closes a connection on which nothing came for silence_timeout (the exchange sends a
        heartbeat every 10 s, so it is broken)."""
        loop = asyncio.get_running_loop()
        timeout = self.options.silence_timeout
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            if loop.time() - self._last_rx > timeout:
                self._silent = True
                await ws.close()
                return

    async def _ping(self, ws: Any) -> None:
        while True:
            await asyncio.sleep(self.options.ping_interval)
            if not await self._send(ws, {"op": "ping", "id": self._new_id()}):
                return

    async def _reconnect(self, reason: str) -> Any:
        # Unsubscriptions in flight are done: the new connection will not have them.
        for fut in self._unsubs.values():
            if not fut.done():
                fut.set_result(None)
        self._ids.clear()
        attempt = 0
        while True:
            attempt += 1
            delay = random.uniform(0, min(self.options.backoff_max, self.options.backoff_base * 2 ** (attempt - 1)))
            try:
                await asyncio.sleep(delay)
                ws = await self._open()
            except _RateLimited as e:
                await asyncio.sleep(e.retry_after if e.retry_after is not None else self.options.backoff_max)
                continue
            except _Fatal as e:
                raise errors.FeedError(f"could not reconnect the feed after {reason}: {e}") from None
            except Exception as e:  # refused, reset, timed out, a bad handshake: try again
                limit = self.options.max_reconnect_attempts
                if limit is not None and attempt >= limit:
                    raise errors.FeedError(f"could not reconnect the feed after {reason}: {attempt} attempts, "
                                           f"the last failed with {e!r}; is the exchange running at {self.url}?") from None
                continue
            if self._closed:
                return ws  # the reader closes it at once
            self.reconnects += 1
            await self._deliver(Reconnected(reason, attempt))
            # Every subscription again, resuming where it stopped. A subscribe() that comes in
            # meanwhile sends on this connection itself.
            self._ws = ws
            for stream in list(self._streams.values()):
                await self._send_subscribe(ws, stream)
            return ws

    # --- what the exchange sends --------------------------------------------------------

    async def _handle(self, msg: dict[str, Any]) -> Optional[str]:
        """Delivers one message of the exchange; returns a reason to reconnect, if any."""
        typ = msg.get("type")
        if typ == "subscribed":
            stream = self._ids.pop(msg.get("id"), None)  # type: ignore[arg-type]
            if stream is not None:
                seq, cursor = msg.get("seq"), msg.get("cursor")
                if stream.cursor is None and isinstance(cursor, str):
                    stream.cursor = cursor  # orders and fills: the events that follow come after it
                    if stream.delivered_cursor is None:
                        stream.delivered_cursor = cursor
                if stream.waiter is not None and not stream.waiter.done():
                    stream.waiter.set_result(Subscribed(msg.get("channel"), msg.get("marketId"), seq, cursor))  # type: ignore[arg-type]
            return None
        if typ == "unsubscribed":
            fut = self._unsubs.get(msg.get("id"))  # type: ignore[arg-type]
            if fut is not None and not fut.done():
                fut.set_result(None)
            return None
        if typ == "error":
            return await self._refused(msg)
        if typ in ("pong",):
            return None
        if typ == "heartbeat":
            if self.options.heartbeats:
                await self._deliver(decode(Heartbeat, msg))
            return None
        if typ == "snapshot":
            stream = self._streams.get(("book", msg.get("marketId")))
            if stream is not None:
                snap = decode(BookSnapshot, msg)
                stream.last = snap.seq
                await self._deliver(snap)
            return None
        if typ == "events":
            stream = self._streams.get((msg.get("channel"), msg.get("marketId")))  # type: ignore[arg-type]
            if stream is None:
                return None
            batch = decode(MarketEvents, msg)
            kept, gap = self._admit(stream, batch.events)
            if kept:
                await self._deliver(MarketEvents(batch.channel, batch.market_id, kept))
            return await self._gap(gap)
        if typ == "accountEvents":
            stream = self._streams.get((msg.get("channel"), None))  # type: ignore[arg-type]
            if stream is None:
                return None
            abatch = decode(AccountEvents, msg)
            kept_a, gap = self._admit_account(stream, abatch.events)
            if gap is None:
                stream.cursor = abatch.cursor
            if kept_a:
                await self._deliver(AccountEvents(abatch.channel, kept_a, abatch.cursor if gap is None else ""))
            return await self._gap(gap)
        if typ == "ticker":
            stream = self._streams.get(("ticker", msg.get("marketId")))
            if stream is not None:
                ticker = decode(Ticker, msg)
                stream.last = ticker.seq
                await self._deliver(ticker)
            return None
        if typ == "market":
            if ("lifecycle", None) in self._streams:
                await self._deliver(decode(MarketChange, msg))
            return None
        return None  # a message type added later: ignored

    def _admit(self, stream: _Stream, events: list[Any]) -> tuple[list[Any], Optional[GapDetected]]:
        """The events that follow on from the stream's last seq; the gap, if one is missing."""
        kept: list[Any] = []
        for ev in events:
            if stream.last is not None and ev.seq <= stream.last:
                continue  # seen already (a resume's replay)
            if stream.channel in _STRICT and stream.last is not None and ev.seq != stream.last + 1:
                return kept, GapDetected(stream.channel, stream.market_id, stream.last + 1, ev.seq)  # type: ignore[arg-type]
            kept.append(ev)
            stream.last = ev.seq
        return kept, None

    def _admit_account(self, stream: _Stream, events: list[AccountEvent]) -> tuple[list[AccountEvent], Optional[GapDetected]]:
        """The account's events that follow on from the last of their stream; the gap, if one
        is missing on ``orders``. The exchange sends each event once after the cursor resumed
        from, so the first event of a stream this feed has not seen yet starts it."""
        kept: list[AccountEvent] = []
        for ev in events:
            last = stream.seqs.get(ev.stream)
            if last is not None and ev.seq <= last:
                continue  # seen already
            if stream.channel in _STRICT and last is not None and ev.seq != last + 1:
                return kept, GapDetected(stream.channel, None, last + 1, ev.seq)  # type: ignore[arg-type]
            kept.append(ev)
            stream.seqs[ev.stream] = ev.seq
        return kept, None

    async def _gap(self, gap: Optional[GapDetected]) -> Optional[str]:
        if gap is None:
            return None
        self.gaps += 1
        await self._deliver(gap)
        where = f"{gap.channel}" + (f" of market {gap.market_id}" if gap.market_id else "")
        return f"a gap in {where}: seq {gap.got} came after {gap.expected - 1}"

    async def _refused(self, msg: dict[str, Any]) -> Optional[str]:
        sid = msg.get("id")
        code, text = str(msg.get("code", "")), str(msg.get("message", ""))
        if sid in self._unsubs:
            fut = self._unsubs[sid]
            if not fut.done():
                fut.set_exception(errors.SubscriptionError(code, text, msg.get("channel"), msg.get("marketId")))
            return None
        stream = self._ids.pop(sid, None)  # type: ignore[arg-type]
        if stream is None or self._streams.get(stream.key) is not stream:
            return None  # an answer to a ping, or to a subscription since ended
        if stream.waiter is not None and not stream.waiter.done():
            # The consumer's own subscribe(): it gets the refusal.
            del self._streams[stream.key]
            stream.waiter.set_exception(errors.SubscriptionError(code, text, stream.channel, stream.market_id))
            return None
        if code == "resync_required":
            stream.last, stream.cursor, stream.seqs = None, None, {}
            await self._deliver(Resynced(stream.channel, stream.market_id, code, text))  # type: ignore[arg-type]
            await self._send_subscribe(self._ws, stream)
            return None
        if code == "unavailable":
            return f"the exchange could not resume {stream.channel}: {text}"
        del self._streams[stream.key]
        await self._deliver(SubscriptionLost(stream.channel, stream.market_id, code, text))  # type: ignore[arg-type]
        return None

    # --- helpers ------------------------------------------------------------------------

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def _send_subscribe(self, ws: Any, stream: _Stream) -> None:
        sid = self._new_id()
        self._ids[sid] = stream
        msg: dict[str, Any] = {"op": "subscribe", "id": sid, "channel": stream.channel}
        if stream.market_id is not None:
            msg["marketId"] = stream.market_id
        if stream.channel in _ACCOUNT_CHANNELS:
            if stream.cursor is not None:
                msg["resumeFrom"] = stream.cursor
        elif stream.last is not None and stream.channel in _RESUMABLE:
            msg["resumeFrom"] = stream.last
        await self._send(ws, msg)

    async def _send(self, ws: Any, msg: dict[str, Any]) -> bool:
        """Sends a message; False if the connection is gone (the reconnect will see to it)."""
        if ws is None:
            return False
        try:
            await ws.send(json.dumps(msg, separators=(",", ":")))
            return True
        except ConnectionClosed:
            return False

    async def _deliver(self, item: Any) -> None:
        assert self._queue is not None
        await self._queue.put(item)

    def _drop_one_if_full(self) -> None:
        assert self._queue is not None
        if self._queue.full():
            self._queue.get_nowait()

    def _fail_waiters(self, err: BaseException) -> None:
        for stream in self._streams.values():
            if stream.waiter is not None and not stream.waiter.done():
                stream.waiter.set_exception(err)
        for fut in self._unsubs.values():
            if not fut.done():
                fut.set_exception(err)


class _RateLimited(Exception):
    def __init__(self, retry_after: Optional[float]) -> None:
        super().__init__("rate limited")
        self.retry_after = retry_after


class Feed:
    """The live feed for synchronous code: :class:`AsyncFeed` run on an event loop in a thread
    of its own. Get one from :meth:`pmx.Client.feed`::

        with client.feed() as feed:
            feed.subscribe("book", market_id)
            for msg in feed:
                ...
    """

    def __init__(self, url: str, api_key: str, options: FeedOptions = FeedOptions(),
                 signer: Optional[signing.Signer] = None) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pmx-feed", daemon=True)
        self._thread.start()
        self._feed = AsyncFeed(url, api_key, options, signer)
        self._stopped = False

    def _wait(self, coro: Any) -> Any:
        if self._stopped:
            coro.close()
            raise errors.FeedError("the feed was closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result()
        except BaseException:
            fut.cancel()  # e.g. Ctrl-C while waiting: leave no recv() behind to eat a message
            raise

    def __enter__(self) -> "Feed":
        self.connect()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def options(self) -> FeedOptions:
        return self._feed.options

    @property
    def reconnects(self) -> int:
        return self._feed.reconnects

    @property
    def gaps(self) -> int:
        return self._feed.gaps

    def connect(self) -> None:
        """Opens the connection (a refused key raises :class:`~pmx.errors.FeedError` here)."""
        self._wait(self._feed.connect())

    def subscribe(self, channel: Channel, market_id: Optional[str] = None, *,
                  resume_from: Union[int, str, None] = None, timeout: float = 30.0) -> Subscribed:
        """As :meth:`AsyncFeed.subscribe`."""
        return self._wait(self._feed.subscribe(channel, market_id, resume_from=resume_from, timeout=timeout))  # type: ignore[no-any-return]

    def unsubscribe(self, channel: Channel, market_id: Optional[str] = None, *, timeout: float = 30.0) -> None:
        """As :meth:`AsyncFeed.unsubscribe`."""
        self._wait(self._feed.unsubscribe(channel, market_id, timeout=timeout))

    def last_seq(self, channel: Channel, market_id: Optional[str] = None) -> Optional[int]:
        """The last seq delivered on a subscription: keep it to resume from it later."""
        return self._feed.last_seq(channel, market_id)

    def last_cursor(self, channel: Channel) -> Optional[str]:
        """As :meth:`AsyncFeed.last_cursor`."""
        return self._feed.last_cursor(channel)

    def recv(self, timeout: Optional[float] = None) -> FeedMessage:
        """The next message; ``TimeoutError`` if none comes within ``timeout`` seconds;
        StopIteration once the feed is closed."""
        try:
            return self._wait(self._feed.recv(timeout))  # type: ignore[no-any-return]
        except StopAsyncIteration:
            raise StopIteration from None

    def __iter__(self) -> Iterator[FeedMessage]:
        while True:
            try:
                yield self.recv()
            except StopIteration:
                return

    def close(self) -> None:
        """Closes the connection and stops the feed's thread."""
        if self._stopped:
            return
        try:
            self._wait(self._feed.close())
        finally:
            self._stopped = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self._loop.close()

