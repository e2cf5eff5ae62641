"""The shapes of the pmx API: what requests take and what responses and feed messages hold.

One definition serves the sync and the async client and the feed. Every response shape is a
frozen dataclass decoded from the server's JSON by :func:`decode`, which maps each snake_case
field to its camelCase JSON property, parses date-times and nested shapes, and ignores
properties it does not know (the API may add some at any time). A property the API documents as
required but that is missing is a :class:`~pmx.errors.ProtocolError`, never a silent ``None``.

Prices are integer cents (1 to 99), quantities and cash integers; enumerations are plain strings
typed with ``Literal`` so that a value added later by the server still decodes.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from .errors import ProtocolError

__all__ = [
    "Side", "Outcome", "MarketStatus", "OrderStatus", "TimeInForce", "SelfTradePrevention",
    "CancelReason", "CandleInterval", "Channel", "AUTO", "Auto",
    "Fees", "Market", "MarketPage", "Level", "OrderBook", "OrderBookSnapshot", "MarketEvent",
    "MarketEventPage", "Trade", "PlacedTrade", "Order", "PlacedOrder", "OrderPage", "OrderRequest", "BatchResult",
    "CancelFailure", "CancelResult", "QueuePosition", "QueuePositionFailure", "QueuePositions", "Position", "Settlement", "SettlementPage", "Fill", "FillPage",
    "Candle", "Candles", "HeartbeatState", "WsToken", "RateLimit", "AccountLimits", "Account", "AccountFees", "ApiKey", "KeyScope", "NewKey",
    "RiskLimits", "RiskLimitsUse", "OrderGroup", "OrderGroupPage",
    "Event", "EventOutcome", "EventPage", "EventDetail", "OutcomeDetail", "Conversion",
    "Series", "SeriesKind", "SeriesPage", "SeriesInstance", "SeriesDetail",
    "AccountEvent", "AccountEventPage", "decode", "format_time",
]

Side = Literal["BUY", "SELL"]
Outcome = Literal["YES", "NO"]
MarketStatus = Literal["OPEN", "CLOSED", "RESOLVED", "CANCELED"]
OrderStatus = Literal["OPEN", "PARTIALLY_FILLED", "FILLED", "CANCELLED", "PARTIALLY_FILLED_CANCELLED"]
TimeInForce = Literal["GTC", "IOC", "FOK", "GTD"]
SelfTradePrevention = Literal["CANCEL_RESTING", "CANCEL_INCOMING"]
CancelReason = Literal["USER", "IOC", "FOK", "EXPIRED", "SELF_TRADE", "MARKET_CLOSED", "HEARTBEAT", "ORDER_GROUP"]
CandleInterval = Literal["1m", "5m", "1h", "1d"]
#: What a key may do: ``read`` (reads and the feed), ``cancel`` (also cancels and heartbeats),
#: ``trade`` (everything but making keys), ``keys`` (everything, and also making and revoking the
#: account's keys: ``create_account_key``, ``revoke_account_key``).
KeyScope = Literal["read", "cancel", "trade", "keys"]
Channel = Literal["book", "trades", "ticker", "lifecycle", "orders", "fills"]


class Auto:
    """The type of :data:`AUTO`."""

    _instance: Optional["Auto"] = None

    def __new__(cls) -> "Auto":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "AUTO"


#: The default ``client_order_id`` of a placement: the SDK gives the order a fresh random id, so
#: that the placement can be retried safely (a repeat answers the same order, placing nothing).
#: Pass ``None`` to send no id (the placement is then never resent once it may have arrived).
AUTO = Auto()


# --- Markets --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fees:
    """A fee schedule, in basis points of P × (1 − P) per share, P the execution price over 100: a
    fill of q shares at p cents costs the taker ⌈taker_bps × q × p × (100 − p) / 1,000,000⌉ cents
    and the maker the same with ``maker_bps`` (a negative ``maker_bps`` is a rebate, rounded down).
    An order keeps the schedule in force when it was placed. Both 0: no fees."""

    #: 0 to 10,000.
    taker_bps: int
    #: From ``-taker_bps`` (a rebate as large as the taker's fee) to ``taker_bps``.
    maker_bps: int


@dataclass(frozen=True)
class Market:
    id: str
    url: Optional[str]
    question: str
    description: Optional[str]
    category: str
    status: MarketStatus
    closes_at: Optional[_dt.datetime]
    resolves_at: Optional[_dt.datetime]
    resolved: bool
    #: The resolution, ``YES`` or ``NO``; ``None`` unless the market is RESOLVED.
    outcome: Optional[Outcome]
    label_a: str
    label_b: str
    created_at: _dt.datetime
    updated_at: _dt.datetime
    #: The fee schedule in force for orders placed now: the market's own, else its event's (both
    #: rates 0 without fees).
    fees: Fees
    #: The event this market is an outcome of, and that outcome's key; ``None`` for a market of
    #: no event.
    event_id: Optional[str] = None
    outcome_key: Optional[str] = None
    #: While trading in the market is halted (placements and amends refused with a 409
    #: ``market_halted``, ``event_halted`` or ``exchange_halted``; cancels still work), by what:
    #: ``market``, ``event`` or ``exchange``. ``None`` while it may trade.
    halted: Optional[str] = None
    #: The series (``get_series``) that listed this market or its event; ``None`` for none.
    series_id: Optional[str] = None


@dataclass(frozen=True)
class MarketPage:
    markets: list[Market]
    #: Pass as ``cursor`` for the next page; ``None`` on the last page (and without paging).
    next_cursor: Optional[str] = None


@dataclass(frozen=True)
class Level:
    price: int
    quantity: int
    total: int


@dataclass(frozen=True)
class OrderBook:
    """One view (YES or NO) of a market's book: the best 10 levels of each side."""

    bids: list[Level]
    asks: list[Level]
    last_trade_price: Optional[int]


@dataclass(frozen=True)
class OrderBookSnapshot:
    order_book_yes: OrderBook
    order_book_no: OrderBook
    #: The market's last feed event this book reflects (follow the feed from here).
    seq: int


@dataclass(frozen=True)
class MarketEvent:
    """One change to a market, numbered by the market's gapless sequence. Prices in YES terms."""

    seq: int
    type: Literal["level", "trade", "status"]
    quantity: int
    at: _dt.datetime
    side: Optional[Literal["bid", "ask"]] = None
    price: Optional[int] = None
    trade_id: Optional[str] = None
    taker_side: Optional[Side] = None
    taker_outcome: Optional[Outcome] = None
    status: Optional[MarketStatus] = None


@dataclass(frozen=True)
class MarketEventPage:
    market_id: str
    events: list[MarketEvent]


@dataclass(frozen=True)
class Trade:
    """One execution, from its taker's view; ``yes_price`` is the price in YES terms."""

    id: str
    market_id: str
    outcome: Outcome
    side: Side
    price: int
    quantity: int
    yes_price: int
    created_at: _dt.datetime


@dataclass(frozen=True)
class PlacedTrade(Trade):
    """A fill a placement (or amend) made as the taker, and the fee it paid for it."""

    #: Cents the order paid the exchange for the fill; 0 in a market without fees.
    fee: int


# --- Orders ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Order:
    id: str
    market_id: str
    side: Side
    outcome: Outcome
    price: int
    quantity: int
    filled_quantity: int
    status: OrderStatus
    created_at: _dt.datetime
    updated_at: _dt.datetime
    time_in_force: TimeInForce
    expires_at: Optional[_dt.datetime]
    post_only: bool
    client_order_id: Optional[str]
    cancel_reason: Optional[CancelReason]
    #: The order group it was placed into (``create_order_group``); None for an order in none.
    order_group_id: Optional[str] = None


@dataclass(frozen=True)
class PlacedOrder(Order):
    """An order right after its placement (or amend), with the fills that made.

    ``replayed`` is true when the exchange answered a repeat of an earlier placement with the same
    ``client_order_id`` (status 200, ``Idempotent-Replayed: true``): nothing new was placed, the
    order is as it stands now, and ``trades`` is empty (its fills are in ``list_fills``).
    """

    trades: list[PlacedTrade] = field(default_factory=list)
    replayed: bool = field(default=False, metadata={"json": None})


@dataclass(frozen=True)
class OrderPage:
    orders: list[Order]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class OrderRequest:
    """One placement of :meth:`~pmx.Client.place_orders` (the fields of ``place_order``)."""

    market_id: str
    side: Side
    outcome: Outcome
    price: int
    quantity: int
    time_in_force: Optional[TimeInForce] = None
    expires_at: Optional[_dt.datetime] = None
    post_only: Optional[bool] = None
    client_order_id: Union[str, None, Auto] = AUTO
    self_trade_prevention: Optional[SelfTradePrevention] = None
    #: One of your order groups to place the order into.
    order_group_id: Optional[str] = None


@dataclass(frozen=True)
class BatchResult:
    """One placement of a batch: ``order`` when it was placed (or replayed), else ``error``."""

    #: What ``POST /order`` would have answered alone: 201 placed, 200 replayed, 4xx refused.
    status: int
    order: Optional[PlacedOrder]
    #: The refusal, as the exception ``place_order`` would have raised (not raised here).
    error: Optional[Any] = None

    @property
    def ok(self) -> bool:
        return self.order is not None


@dataclass(frozen=True)
class CancelFailure:
    """An order of ``cancel_orders`` that was not cancelled, and why (as ``cancel_order`` says)."""

    order_id: str
    error: Any  # an ApiError subclass instance, not raised


@dataclass(frozen=True)
class CancelResult:
    cancelled: list[Order]
    errors: list[CancelFailure]


@dataclass(frozen=True)
class QueuePosition:
    """Where a resting order stands in its price level's queue, in the order's own terms: the
    unfilled shares ahead of it at its price (placed earlier) and of the whole level."""

    order_id: str
    market_id: str
    side: Side
    outcome: Outcome
    price: int
    ahead_quantity: int
    level_quantity: int


@dataclass(frozen=True)
class QueuePositionFailure:
    """An order of ``get_queue_positions`` with no place in a queue, and why (as
    ``get_queue_position`` says)."""

    order_id: str
    error: Any  # an ApiError subclass instance, not raised


@dataclass(frozen=True)
class QueuePositions:
    positions: list[QueuePosition]
    errors: list[QueuePositionFailure]


# --- Account --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    id: str
    market_id: str
    market_question: str
    market_status: MarketStatus
    outcome: Outcome
    #: All shares held, including ``locked_quantity`` locked by open SELL orders.
    quantity: int
    locked_quantity: int
    created_at: _dt.datetime
    updated_at: _dt.datetime


@dataclass(frozen=True)
class Settlement:
    market_id: str
    market_status: Literal["RESOLVED", "CANCELED"]
    outcome: Outcome
    quantity: int
    #: Cents paid for these shares.
    payout: int
    settled_at: _dt.datetime


@dataclass(frozen=True)
class SettlementPage:
    settlements: list[Settlement]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class Fill:
    """A fill of one of your orders; ``price`` is in the order's own outcome's terms."""

    id: str
    trade_id: str
    order_id: str
    client_order_id: Optional[str]
    market_id: str
    side: Side
    outcome: Outcome
    price: int
    quantity: int
    role: Literal["MAKER", "TAKER"]
    created_at: _dt.datetime
    #: Cents this side paid the exchange for the fill: negative for a maker's rebate, 0 in a
    #: market without fees. A fill event of the account feed recorded before fees existed has
    #: none: it reads as 0.
    fee: int = 0


@dataclass(frozen=True)
class FillPage:
    fills: list[Fill]
    next_cursor: Optional[str]


@dataclass(frozen=True)
class Candle:
    """OHLC of the YES price over one interval, the shares traded and the number of trades."""

    start: _dt.datetime
    open: int
    high: int
    low: int
    close: int
    volume: int
    trades: int


@dataclass(frozen=True)
class Candles:
    market_id: str
    interval: CandleInterval
    from_: _dt.datetime = field(metadata={"json": "from"})
    to: _dt.datetime
    candles: list[Candle]


@dataclass(frozen=True)
class HeartbeatState:
    """The dead-man switch: when it fires unless renewed (``None`` when disarmed)."""

    armed: bool
    deadline: Optional[_dt.datetime]


@dataclass(frozen=True)
class WsToken:
    token: str
    expires_at: _dt.datetime


@dataclass(frozen=True)
class RateLimit:
    limited: bool
    per_second: float
    burst: float
    remaining: float
    reset_seconds: float


@dataclass(frozen=True)
class AccountLimits:
    reads: RateLimit
    writes: RateLimit


@dataclass(frozen=True)
class RiskLimitsUse:
    """What the account uses of its risk limits now."""

    #: The largest position-if-filled in any market and outcome: shares held plus the remaining
    #: quantity of open BUY orders of that outcome (0 if none).
    position: int
    #: The market and outcome of that position; None when there is none.
    position_market_id: Optional[str]
    position_outcome: Optional[Outcome]
    #: Cents the account's open orders lock now, across all markets.
    locked_cash: int


@dataclass(frozen=True)
class RiskLimits:
    """The account's self-set risk limits (None: no limit) and what it uses of them. An order that
    could pass one is refused: a :class:`~pmx.errors.BadRequestError` with ``code``
    ``risk_limit_exceeded`` and ``field`` naming the limit (``maxPosition`` or ``maxLockedCash``)."""

    #: Shares per market and outcome, held plus on open BUY orders.
    max_position: Optional[int]
    #: Cents locked by open orders, across all markets.
    max_locked_cash: Optional[int]
    used: RiskLimitsUse


@dataclass(frozen=True)
class OrderGroup:
    """An order group: once the shares its orders fill within ``window_seconds`` reach
    ``fill_limit``, its resting orders are cancelled (``cancel_reason`` ``ORDER_GROUP``) and it is
    ``triggered``: a placement into it is a :class:`~pmx.errors.ConflictError` with ``code``
    ``order_group_triggered`` until ``reset_order_group``."""

    id: str
    fill_limit: int
    window_seconds: int
    #: Shares its orders filled within the window ending now, since ``counted_from``.
    filled_in_window: int
    triggered: bool
    triggered_at: Optional[_dt.datetime]
    #: When it was made or last reset: fills before do not count.
    counted_from: _dt.datetime
    created_at: _dt.datetime


@dataclass(frozen=True)
class OrderGroupPage:
    """A page of your order groups (``list_order_groups`` with ``limit`` or ``cursor``)."""

    order_groups: list[OrderGroup]
    #: Pass as ``cursor`` for the next page; ``None`` on the last page.
    next_cursor: Optional[str]


@dataclass(frozen=True)
class EventOutcome:
    #: Unique within the event, fixed once it is created.
    key: str
    label: str
    #: The market whose YES means this outcome wins.
    market_id: str


@dataclass(frozen=True)
class Event:
    """An event: a question of 2 to 50 mutually exclusive outcomes, each traded as a market of its
    own. Resolving it to one outcome resolves that outcome's market YES and every other's NO;
    closing, reopening and cancelling move all of its markets together, so its ``status`` is each
    of its markets' status."""

    id: str
    name: str
    question: str
    category: str
    status: MarketStatus
    created_at: _dt.datetime
    #: In the event's order.
    outcomes: list[EventOutcome]
    description: Optional[str] = None
    url: Optional[str] = None
    #: The winning outcome's key; ``None`` unless RESOLVED.
    resolution: Optional[str] = None
    closes_at: Optional[_dt.datetime] = None
    resolves_at: Optional[_dt.datetime] = None
    #: While trading in the event's markets is halted, by what: ``event`` or ``exchange``.
    halted: Optional[str] = None
    #: The event's fee schedule, which its markets without one of their own carry; ``None`` when
    #: it has none.
    fees: Optional[Fees] = None
    #: The series (``get_series``) that listed this event, as its markets' ``series_id`` says too;
    #: ``None`` for none.
    series_id: Optional[str] = None


@dataclass(frozen=True)
class EventPage:
    events: list[Event]
    #: Pass as ``cursor`` for the next page; ``None`` on the last page.
    next_cursor: Optional[str]


@dataclass(frozen=True)
class OutcomeDetail:
    """An outcome of an event with its market's YES prices in cents."""

    key: str
    label: str
    market_id: str
    #: The best YES bid; ``None`` when nobody bids.
    best_bid: Optional[int]
    #: The best YES ask; ``None`` when nobody offers.
    best_ask: Optional[int]
    #: The YES price of the market's last trade; ``None`` before any.
    last_price: Optional[int]
    #: ``(best_bid + best_ask) / 2``, a missing bid counting as 0 and a missing ask as 100.
    yes_mid: float


@dataclass(frozen=True)
class EventDetail:
    """An :class:`Event` as ``get_event`` answers it, its outcomes with their YES prices."""

    id: str
    name: str
    question: str
    category: str
    status: MarketStatus
    created_at: _dt.datetime
    outcomes: list[OutcomeDetail]
    #: The sum of the outcomes' ``yes_mid`` (about 100 when they are priced consistently).
    yes_mid_sum: float
    description: Optional[str] = None
    url: Optional[str] = None
    resolution: Optional[str] = None
    closes_at: Optional[_dt.datetime] = None
    resolves_at: Optional[_dt.datetime] = None
    #: While trading in the event's markets is halted, by what: ``event`` or ``exchange``.
    halted: Optional[str] = None
    #: The event's fee schedule, which its markets without one of their own carry; ``None`` when
    #: it has none.
    fees: Optional[Fees] = None
    #: The series (``get_series``) that listed this event, as its markets' ``series_id`` says too;
    #: ``None`` for none.
    series_id: Optional[str] = None


SeriesKind = Literal["MARKET", "EVENT"]


@dataclass(frozen=True)
class Series:
    """A series: a market or an event listed again and again from one template on a cron
    schedule. ``question`` is the template's: ``{date}`` and ``{time}`` stand for each instance's
    date and time in ``time_zone``; ``next_instance_at`` is the next instance's scheduled time."""

    id: str
    name: str
    kind: SeriesKind
    question: str
    description: Optional[str]
    category: str
    schedule: str
    time_zone: str
    next_instance_at: Optional[_dt.datetime]
    created_at: _dt.datetime
    updated_at: _dt.datetime


@dataclass(frozen=True)
class SeriesPage:
    series: list[Series]
    #: Pass as ``cursor`` for the next page; ``None`` on the last page.
    next_cursor: Optional[str]


@dataclass(frozen=True)
class SeriesInstance:
    """One instance of a series not settled yet: a market (``market_id``), or in a series of events
    an event (``event_id``)."""

    name: str
    status: MarketStatus
    closes_at: Optional[_dt.datetime]
    resolves_at: Optional[_dt.datetime]
    market_id: Optional[str] = None
    event_id: Optional[str] = None


@dataclass(frozen=True)
class SeriesDetail:
    """A :class:`Series` as ``get_series`` answers it, with its instances not settled yet, soonest
    to close first: the first OPEN one trades now."""

    id: str
    name: str
    kind: SeriesKind
    question: str
    description: Optional[str]
    category: str
    schedule: str
    time_zone: str
    next_instance_at: Optional[_dt.datetime]
    created_at: _dt.datetime
    updated_at: _dt.datetime
    instances: list[SeriesInstance]


@dataclass(frozen=True)
class Conversion:
    """A conversion of an event's shares (``convert_event_shares``): ``quantity`` NO shares of
    each of the k ``outcomes`` became ``quantity`` YES shares of each other outcome and ``cash``,
    ``(k - 1) * 100 * quantity`` cents. ``replayed`` is true when the exchange answered a repeat
    of an earlier conversion with the same ``client_request_id``, which changed nothing more."""

    id: str
    event_id: str
    outcomes: list[str]
    quantity: int
    cash: int
    created_at: _dt.datetime
    client_request_id: Optional[str] = None
    replayed: bool = field(default=False, metadata={"json": None})


@dataclass(frozen=True)
class Account:
    id: str
    name: str
    #: Cash free to lock, in cents.
    available: int
    #: Cash locked by open BUY orders, in cents.
    locked: int
    created_at: _dt.datetime


@dataclass(frozen=True)
class AccountFees:
    """What your fills made at or after ``since`` and before ``until`` paid in fees and were paid
    in rebates (``get_account_fees``), in cents."""

    since: _dt.datetime
    until: _dt.datetime
    #: Fees your fills in the period paid, as taker and as maker.
    paid: int
    #: Rebates the exchange paid you for your fills in the period.
    rebates: int
    #: ``paid - rebates``.
    net: int
    #: Your fills in the period that paid a fee or were paid a rebate.
    fills: int


@dataclass(frozen=True)
class ApiKey:
    """One of your API keys as ``list_account_keys`` shows it: never its secret."""

    id: str
    #: The key's public first part, which names it.
    prefix: str
    label: str
    scope: KeyScope
    created_at: _dt.datetime
    #: When the key stops working (401 ``key_expired``); None if never.
    expires_at: Optional[_dt.datetime]
    #: The CIDR ranges requests with the key may come from (403 ``ip_not_allowed``); empty: anywhere.
    ip_allowlist: list[str]
    #: The Ed25519 public key (base64 of its 32 bytes) every request of the key must be signed
    #: with (``signing_key=``, :mod:`pmx.signing`); None for a key whose requests are not signed.
    public_key: Optional[str]
    #: About when the key was last used (written at most once a minute); None if never.
    last_used_at: Optional[_dt.datetime]
    revoked_at: Optional[_dt.datetime]
    #: Whether this is the key the listing was asked with.
    current: bool


@dataclass(frozen=True)
class NewKey:
    """A key ``create_account_key`` made: the whole key, shown this once (the exchange keeps only
    its hash), and the key as ``list_account_keys`` shows it."""

    #: The whole key, to pass as a client's ``api_key``.
    api_key: str
    key: ApiKey


@dataclass(frozen=True)
class AccountEvent:
    """One change to your account: ``seq`` in its ``stream`` (the shard that committed it;
    ``""``, every feed's first), each stream gapless.

    ``accepted``, ``amended``, ``cancelled``: ``order`` is the order's whole state after it.
    ``fill``: ``fill``, and the order's ``filled_quantity`` and ``status`` after it.
    ``settled``: ``settlement``.
    ``converted``: ``conversion``, as ``convert_event_shares`` answered it.
    """

    seq: int
    type: Literal["accepted", "amended", "fill", "cancelled", "settled", "converted"]
    at: _dt.datetime
    order: Optional[Order] = None
    fill: Optional[Fill] = None
    settlement: Optional[Settlement] = None
    conversion: Optional[Conversion] = None
    filled_quantity: Optional[int] = None
    status: Optional[OrderStatus] = None
    stream: str = ""


@dataclass(frozen=True)
class AccountEventPage:
    #: Where the page leaves you in the feed: pass it as ``after`` for more.
    cursor: str
    events: list[AccountEvent]
    #: Deprecated: ``cursor`` as a number, given only while the feed is the one stream ``""``.
    seq: Optional[int] = None


# --- Decoding -------------------------------------------------------------------------------

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", re.IGNORECASE)


def parse_time(value: str) -> _dt.datetime:
    """Reads an RFC 3339 date-time (nanoseconds are cut to microseconds) as an aware datetime."""
    m = _TIME.match(value)
    if m is None:
        raise ValueError(f"not an RFC 3339 date-time: {value!r}")
    base, frac, zone = m.groups()
    frac = (frac or "")[:7]  # the dot and up to six digits
    zone = "+00:00" if zone in ("Z", "z") else zone
    return _dt.datetime.fromisoformat(base + frac + zone)


def format_time(value: _dt.datetime) -> str:
    """Writes a datetime as RFC 3339; a naive one is taken to be UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    return value.isoformat()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class _Field:
    __slots__ = ("name", "json", "tp", "required")

    def __init__(self, name: str, json: str, tp: Any, required: bool) -> None:
        self.name, self.json, self.tp, self.required = name, json, tp, required


_fields_cache: dict[type, list[_Field]] = {}


def _fields_of(cls: type) -> list[_Field]:
    cached = _fields_cache.get(cls)
    if cached is not None:
        return cached
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    out = []
    for f in dataclasses.fields(cls):
        json = f.metadata.get("json", _camel(f.name))
        if json is None:
            continue  # not from the JSON (e.g. PlacedOrder.replayed)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(_Field(f.name, json, hints[f.name], required))
    _fields_cache[cls] = out
    return out


def _decode(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _decode(args[0], value, path) if len(args) == 1 else value
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{path}: expected an array, got {type(value).__name__}")
        (item,) = typing.get_args(tp)
        return [_decode(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
    if origin is Literal:
        if not isinstance(value, str):
            raise ProtocolError(f"{path}: expected a string, got {value!r}")
        return value
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return decode(tp, value, path)
    if tp is _dt.datetime:
        if not isinstance(value, str):
            raise ProtocolError(f"{path}: expected a date-time string, got {value!r}")
        try:
            return parse_time(value)
        except ValueError as e:
            raise ProtocolError(f"{path}: {e}") from None
    if tp is bool:
        if not isinstance(value, bool):
            raise ProtocolError(f"{path}: expected a boolean, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"{path}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"{path}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ProtocolError(f"{path}: expected a string, got {value!r}")
        return value
    raise TypeError(f"pmx.models: cannot decode {tp!r}")  # a bug in this package


T = typing.TypeVar("T")


def decode(cls: type[T], data: Any, path: str = "$", **extra: Any) -> T:
    """Builds the dataclass ``cls`` from the JSON object ``data`` (``extra`` sets more fields)."""
    if not isinstance(data, dict):
        raise ProtocolError(f"{path}: expected a JSON object for {cls.__name__}, got {type(data).__name__}")
    kwargs: dict[str, Any] = dict(extra)
    for f in _fields_of(cls):
        if f.json in data:
            kwargs[f.name] = _decode(f.tp, data[f.json], f"{path}.{f.json}")
        elif f.required:
            raise ProtocolError(f"{path}: the {cls.__name__} has no {f.json!r}, which the API documents as required")
    return cls(**kwargs)
