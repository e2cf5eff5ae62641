"""The synchronous client: every endpoint of :mod:`pmx._core`, sent with ``httpx.Client``."""

from __future__ import annotations

import os
import time
from typing import Any, Concatenate, ParamSpec, Callable, Iterator, Optional, TypeVar

import httpx

from . import _core
from ._core import Call, RetryInfo, RetryPolicy
from .feed import Feed, FeedOptions


__all__ = ["Client"]

T = TypeVar("T")
P = ParamSpec("P")


def _method(build: Callable[P, Call[T]]) -> Callable[Concatenate["Client", P], T]:
    return _core.client_method(build, lambda self, call: self.call(call))


class Client:
    """A pmx client that waits for each answer.

    ``url`` is the exchange (``http://127.0.0.1:8080``, or its API URL ending in ``/api/v1``;
    default ``$PMX_URL``, else ``http://127.0.0.1:8080``); ``api_key`` a key from the exchange's
    ``/settings`` page (default ``$PMX_API_KEY``). Every method sends one request (again, as
    ``retry`` says, when it failed in a way that makes that safe), returns the answer as typed
    dataclasses, and raises an :class:`~pmx.errors.ApiError` subclass for an error answer.
    ``on_retry`` is called with a :class:`~pmx._core.RetryInfo` before each wait for a retry.
    ``signing_key``, the Ed25519 private key of a key registered with its public key, signs
    every request and the feed's upgrade (:mod:`pmx.signing`); with it, ``api_key`` may be the
    key's prefix alone, and the secret is never sent.

    Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = 10.0, retry: RetryPolicy = RetryPolicy(),
                 on_retry: Optional[Callable[[RetryInfo], None]] = None,
                 signing_key: Any = None,
                 http_client: Optional[httpx.Client] = None) -> None:
        self._session = _core.Session(url, api_key, retry, on_retry, os.environ, signing_key)
        self.base_url = self._session.base_url
        self._http = http_client or httpx.Client(timeout=timeout)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def call(self, call: Call[T]) -> T:
        """Sends one call, retrying as the client's ``retry`` policy says, and reads its answer."""
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self._http.request(**self._session.request(call))
            except httpx.TransportError as e:
                step = self._session.failed(call, attempt, e)
            else:
                step = self._session.answered(call, attempt, resp)
            if step.done:
                return step.value  # type: ignore[return-value]
            time.sleep(step.delay)

    # --- the feed -----------------------------------------------------------------------

    def feed(self, options: Optional[FeedOptions] = None) -> Feed:
        """The live feed (WebSocket) of this client's account; use it as a context manager."""
        return Feed(_core.feed_url(self.base_url), self._session.api_key, options or FeedOptions(),
                         signer=self._session.signer)

    # --- paging -------------------------------------------------------------------------

    def pages(self, method: Callable[..., Any], **kwargs: Any) -> Iterator[Any]:
        """Every page of a cursor listing (``list_orders``, ``list_fills``, ``list_settlements``,
        ``list_markets``, ``list_events``, ``list_series``), following ``next_cursor``: ``for page in client.pages(client.list_fills)``."""
        cursor = kwargs.pop("cursor", None)
        while True:
            page = method(cursor=cursor, **kwargs)
            yield page
            cursor = page.next_cursor
            if cursor is None:
                return

    # --- the endpoints (built in pmx._core, one definition for both clients) ------------

    list_markets = _method(_core.list_markets)
    get_market = _method(_core.get_market)
    get_order_book = _method(_core.get_order_book)
    list_market_trades = _method(_core.list_market_trades)
    get_market_events = _method(_core.get_market_events)
    get_candles = _method(_core.get_candles)
    place_order = _method(_core.place_order)
    place_orders = _method(_core.place_orders)
    amend_order = _method(_core.amend_order)
    cancel_order = _method(_core.cancel_order)
    cancel_orders = _method(_core.cancel_orders)
    cancel_everything = _method(_core.cancel_everything)
    heartbeat = _method(_core.heartbeat)
    get_order = _method(_core.get_order)
    get_queue_position = _method(_core.get_queue_position)
    get_queue_positions = _method(_core.get_queue_positions)
    list_orders = _method(_core.list_orders)
    list_fills = _method(_core.list_fills)
    get_account = _method(_core.get_account)
    list_positions = _method(_core.list_positions)
    list_settlements = _method(_core.list_settlements)
    get_account_events = _method(_core.get_account_events)
    get_account_limits = _method(_core.get_account_limits)
    get_account_fees = _method(_core.get_account_fees)
    list_account_keys = _method(_core.list_account_keys)
    create_account_key = _method(_core.create_account_key)
    revoke_account_key = _method(_core.revoke_account_key)
    get_risk_limits = _method(_core.get_risk_limits)
    set_risk_limits = _method(_core.set_risk_limits)
    create_order_group = _method(_core.create_order_group)
    list_order_groups = _method(_core.list_order_groups)
    get_order_group = _method(_core.get_order_group)
    reset_order_group = _method(_core.reset_order_group)
    delete_order_group = _method(_core.delete_order_group)
    list_events = _method(_core.list_events)
    get_event = _method(_core.get_event)
    list_series = _method(_core.list_series)
    get_series = _method(_core.get_series)
    convert_event_shares = _method(_core.convert_event_shares)
    create_ws_token = _method(_core.create_ws_token)

