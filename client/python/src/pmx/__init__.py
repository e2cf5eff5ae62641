"""pmx: the Python SDK of the pmx prediction-market exchange.

:class:`Client` (synchronous) and :class:`AsyncClient` (asyncio) cover every endpoint of the
public REST API (``/api/v1``) with typed answers (:mod:`pmx.models`), typed errors
(:mod:`pmx.errors`), safe retries (:class:`RetryPolicy`) and the live feed (:mod:`pmx.feed`).
"""

from ._core import ENDPOINTS, NO_RETRIES, RetryInfo, RetryPolicy, new_client_order_id
from .aio import AsyncClient
from .client import Client
from .errors import (
    ApiError, AuthenticationError, BadRequestError, ConflictError, FeedError, NotFoundError,
    PermissionDeniedError, PmxError, ProtocolError, RateLimitedError, ResyncRequiredError,
    ServerError, SubscriptionError, TransportError,
)
from .feed import (
    AccountEvents, AsyncFeed, BookSnapshot, Feed, FeedLevel, FeedMessage, FeedOptions, GapDetected,
    Heartbeat, MarketChange, MarketEvents, Reconnected, Resynced, Subscribed, SubscriptionLost, Ticker,
)
from .models import *  # noqa: F401,F403
from .models import __all__ as _models_all

__version__ = "0.1.0"

__all__ = [
    "Client", "AsyncClient", "RetryPolicy", "RetryInfo", "NO_RETRIES", "ENDPOINTS",
    "new_client_order_id",
    "PmxError", "ApiError", "BadRequestError", "AuthenticationError", "PermissionDeniedError",
    "NotFoundError", "ConflictError", "ResyncRequiredError", "RateLimitedError", "ServerError",
    "TransportError", "ProtocolError", "FeedError", "SubscriptionError",
    "Feed", "AsyncFeed", "FeedOptions", "FeedMessage", "Subscribed", "FeedLevel", "BookSnapshot",
    "MarketEvents", "Ticker", "MarketChange", "AccountEvents", "Heartbeat", "Reconnected",
    "GapDetected", "Resynced", "SubscriptionLost",
    *_models_all,
]
