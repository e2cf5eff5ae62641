"""Making and revoking keys with the SDK (``create_account_key``, ``revoke_account_key``), with the
sync client and with the async client, against a real exchange."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

import pmx
from conftest import ready, run_with
from pmxdev import PmxDev


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_keys_made_and_revoked(exchange: PmxDev, flavour: str) -> None:
    # An account the admin API opened has no settings page: the operator gives it a keys key.
    _, account = exchange.new_account()
    manager_key = exchange.new_key(account, scope="keys", label="manager")
    market = exchange.new_market(f"Keys ({flavour})?")

    async def scenario(manager: Any) -> None:
        # The cancel-only desk key: it cancels, and cannot trade.
        made = await ready(manager.create_account_key(label="desk", scope="cancel"))
        assert isinstance(made, pmx.NewKey) and isinstance(made.key, pmx.ApiKey)
        assert (made.key.scope, made.key.label, made.key.revoked_at, made.key.current) == ("cancel", "desk", None, False)
        assert made.api_key.startswith(made.key.prefix + "_")
        desk = pmx.Client(exchange.url, made.api_key) if flavour == "sync" else pmx.AsyncClient(exchange.url, made.api_key)
        try:
            assert await ready(desk.cancel_everything()) == []
            with pytest.raises(pmx.PermissionDeniedError) as refused:
                await ready(desk.place_order(market, "BUY", "YES", 40, 1))
            assert (refused.value.code, refused.value.field) == ("insufficient_scope", "trade")
            # Its scope is below keys: it makes no key.
            with pytest.raises(pmx.PermissionDeniedError) as refused:
                await ready(desk.create_account_key())
            assert (refused.value.code, refused.value.field) == ("insufficient_scope", "keys")

            # A key bound to an expiry makes none that outlives it.
            soon = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(days=1)
            bounded = await ready(manager.create_account_key(scope="keys", expires_at=soon))
            assert bounded.key.expires_at == soon
            bounded_client = (pmx.Client(exchange.url, bounded.api_key) if flavour == "sync"
                             else pmx.AsyncClient(exchange.url, bounded.api_key))
            try:
                with pytest.raises(pmx.PermissionDeniedError) as refused:
                    await ready(bounded_client.create_account_key(expires_at=soon + dt.timedelta(seconds=1)))
                assert (refused.value.code, refused.value.field) == ("exceeds_own_key", "expiresAt")
                inherited = await ready(bounded_client.create_account_key(scope="read"))
                assert (inherited.key.scope, inherited.key.expires_at) == ("read", soon)
            finally:
                await ready(bounded_client.close())

            # Revoked, the desk key is refused; revoked again, it is not found.
            assert await ready(manager.revoke_account_key(made.key.id)) is None
            with pytest.raises(pmx.AuthenticationError) as gone:
                await ready(desk.get_account())
            assert gone.value.code == "invalid_api_key"
            with pytest.raises(pmx.NotFoundError) as missing:
                await ready(manager.revoke_account_key(made.key.id))
            assert missing.value.code == "key_not_found"
            listed = {k.id: k for k in await ready(manager.list_account_keys())}
            assert listed[made.key.id].revoked_at is not None
        finally:
            await ready(desk.close())

    run_with(flavour, exchange.url, manager_key, scenario)


def test_feed_ends_with_its_key(exchange: PmxDev) -> None:
    # A feed whose key is revoked while it runs ends with FeedError at once (close code 4004),
    # rather than reconnecting with a key every connection refuses.
    _, account = exchange.new_account()
    manager_key = exchange.new_key(account, scope="keys", label="manager")

    async def main() -> None:
        async with pmx.AsyncClient(exchange.url, manager_key) as manager:
            made = await manager.create_account_key(scope="read", label="bot")
            async with pmx.AsyncClient(exchange.url, made.api_key) as bot, bot.feed() as feed:
                await feed.subscribe("orders")
                await manager.revoke_account_key(made.key.id)
                deadline = time.monotonic() + 30
                with pytest.raises(pmx.FeedError, match="revoked or expired"):
                    while time.monotonic() < deadline:
                        try:
                            msg = await feed.recv(timeout=1)
                        except TimeoutError:
                            continue
                        assert not isinstance(msg, pmx.Reconnected), msg

    asyncio.run(main())
