"""The exceptions of the pmx SDK.

Every answer of the API that is not a success becomes an :class:`ApiError` of the class for its
status (``BadRequestError`` for 400, ``RateLimitedError`` for 429, ...), carrying the stable
``code`` and the ``field`` at fault from the error body
``{"error": "...", "details": {"code": "...", "field": "..."}}``. Branch on ``code``; ``message``
is the server's sentence for people, which says what was wrong and what to do.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

__all__ = [
    "PmxError", "ApiError", "BadRequestError", "AuthenticationError", "PermissionDeniedError",
    "NotFoundError", "ConflictError", "ResyncRequiredError", "RateLimitedError", "ServerError",
    "TransportError", "ProtocolError", "FeedError", "SubscriptionError", "error_from_response",
]


class PmxError(Exception):
    """The base of every exception this SDK raises."""


class ApiError(PmxError):
    """The exchange answered with an error status.

    Attributes: ``status`` (the HTTP status), ``code`` (stable snake_case, e.g.
    ``insufficient_funds``), ``field`` (the request field or query parameter at fault, or
    ``None``), ``message`` (the server's human sentence), ``headers`` (the answer's headers).
    """

    status: int
    code: str
    field: Optional[str]
    message: str
    headers: Mapping[str, str]

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None,
                 headers: Optional[Mapping[str, str]] = None) -> None:
        self.status, self.code, self.field, self.message = status, code, field, message
        self.headers = headers if headers is not None else {}
        where = f" (field {field!r})" if field else ""
        super().__init__(f"{status} {code}{where}: {message}")


class BadRequestError(ApiError):
    """400: the request was refused and changed nothing (see ``code`` and ``field``)."""


class AuthenticationError(ApiError):
    """401: the API key is missing, malformed, unknown, revoked or expired (``key_expired``).
    Create a key on /settings."""


class PermissionDeniedError(ApiError):
    """403: the order belongs to another account (``not_your_order``), or the key may not make
    the request: its scope does not allow it (``insufficient_scope``, ``field`` the scope it
    needs) or it came from outside the key's address allowlist (``ip_not_allowed``). Nothing was
    done."""


class NotFoundError(ApiError):
    """404: no such market or order (or the key's account no longer exists)."""


class ConflictError(ApiError):
    """409: e.g. ``client_order_id_reused``, a client order id given to other parameters; or
    ``market_halted``, ``event_halted``, ``exchange_halted``: a placement or amend in a halted market
    (``Market.halted``; cancels still work)."""


class ResyncRequiredError(ApiError):
    """410 ``resync_required``: the events asked for are past retention; read the state again."""


class RateLimitedError(ApiError):
    """429: the account's rate limit is spent; nothing changed. ``retry_after`` is in seconds."""

    retry_after: Optional[float]

    def __init__(self, status: int, code: str, message: str, field: Optional[str] = None,
                 headers: Optional[Mapping[str, str]] = None, retry_after: Optional[float] = None) -> None:
        super().__init__(status, code, message, field, headers)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx: the exchange failed to answer. A request that may have taken effect is not resent."""


class TransportError(PmxError):
    """The request did not get an answer (connection refused or cut, timeout), after retries.

    ``maybe_sent`` is true when the request may have reached the exchange: then it may have taken
    effect. A placement with a ``client_order_id`` is safe to repeat: repeat it with the same id.
    """

    def __init__(self, message: str, maybe_sent: bool) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent


class ProtocolError(PmxError):
    """The exchange answered something this SDK cannot read (a bug of the SDK or the server)."""


class FeedError(PmxError):
    """The live feed failed for good (e.g. its key was refused); it does not reconnect."""


class SubscriptionError(FeedError):
    """The feed refused a subscribe or unsubscribe message (``code``, e.g. ``unknown_market``)."""

    def __init__(self, code: str, message: str, channel: Optional[str] = None,
                 market_id: Optional[str] = None) -> None:
        self.code, self.message, self.channel, self.market_id = code, message, channel, market_id
        what = channel + (f" {market_id}" if market_id else "") if channel else "message"
        super().__init__(f"{what}: {code}: {message}")


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
    409: ConflictError, 410: ResyncRequiredError, 429: RateLimitedError,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (pmx sends whole seconds); None when absent or unreadable."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0.0, seconds)


def error_from_response(status: int, body: Any, headers: Mapping[str, str]) -> ApiError:
    """The exception for an error answer: its status's class, with the body's code and field."""
    message, code, field = "", "", None
    if isinstance(body, dict):
        message = str(body.get("error") or "")
        details = body.get("details")
        if isinstance(details, dict):
            code = str(details.get("code") or "")
            f = details.get("field")
            field = str(f) if f else None
    if not code:
        code = f"http_{status}"
    if not message:
        message = f"the exchange answered HTTP {status} without an error body"
    if status == 429:
        return RateLimitedError(status, code, message, field, headers,
                                retry_after=parse_retry_after(headers.get("retry-after")))
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, code, message, field, headers)
