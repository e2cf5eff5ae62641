"""Signed requests: the string signed is the one the API document gives byte for byte (its worked
example), and a client with ``signing_key=`` has its requests, retries included, and its feed's
upgrade accepted by a real ``pmx dev`` for a key that must sign, with the key's secret and with
its prefix alone; without the signature, or with another key's, the exchange refuses."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import pmx
from conftest import ready, run_with
from pmx import signing
from pmxdev import PmxDev

# The API document's worked example (apiserver/openapi.yaml, "Signed requests").
SEED = hashlib.sha256(b"pmx signing example").digest()
BODY = b'{"marketId":"m1","side":"BUY","outcome":"YES","price":40,"quantity":10}'


def test_worked_example() -> None:
    assert signing.signed_message("1767225600000", "POST", "/api/v1/order", BODY) == (
        b"1767225600000\nPOST\n/api/v1/order\n2dff3b8ebb6dbff975ae637b65565438c1b95bce8246e6d3d2c5905c59bf0954")
    s = signing.Signer(SEED)
    assert s.public_key() == "TQ4mJ/zK8sowTT0QsToI5+29PhsclIQW4Y8WSdDehvk="
    assert s.headers("POST", "/api/v1/order", BODY, now_ms=1767225600000) == {
        "PMX-Timestamp": "1767225600000",
        "PMX-Signature": "2rR+sZUi+/b06EW1TlChdaexQ6cek7V0qn8xUgRX6ddrUF7VKs1FHlWhAjhUzTxAdzrN51BxpQ+xzW/Rw0gmBw=="}
    # The next request in the same millisecond is signed at the next one.
    assert s.headers("GET", "/api/v1/account", now_ms=1767225600000)["PMX-Timestamp"] == "1767225600001"
    pem = Ed25519PrivateKey.from_private_bytes(SEED).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    assert signing.Signer(pem).public_key() == s.public_key()


def signing_account(exchange: PmxDev) -> tuple[str, Ed25519PrivateKey]:
    priv = Ed25519PrivateKey.generate()
    raw = priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    key, _ = exchange.new_account(publicKey=base64.b64encode(raw).decode())
    return key, priv


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("bare", [False, True], ids=["secret", "prefix"])
def test_signed_client(exchange: PmxDev, market: str, flavour: str, bare: bool) -> None:
    key, priv = signing_account(exchange)
    api_key = key[:20] if bare else key

    async def scenario(c: Any) -> None:
        keys = await ready(c.list_account_keys())
        assert len(keys) == 1 and keys[0].public_key is not None
        await ready(c.list_orders(market_id=market))
        placed = await ready(c.place_order(market, "BUY", "YES", 30, 1))
        await ready(c.cancel_order(placed.id))
        for _ in range(20):  # identical requests back to back: each signed at its own millisecond
            await ready(c.get_account())
        if flavour == "sync":
            with c.feed() as feed:
                assert feed.subscribe("book", market).channel == "book"
        else:
            async with c.feed() as feed:
                assert (await feed.subscribe("book", market)).channel == "book"

    run_with(flavour, exchange.url, api_key, scenario, signing_key=priv)


def test_signing_refusals(exchange: PmxDev) -> None:
    key, priv = signing_account(exchange)
    with pmx.Client(exchange.url, key) as unsigned:
        with pytest.raises(pmx.AuthenticationError) as e:
            unsigned.get_account()
        assert e.value.code == "invalid_signature"
    with pmx.Client(exchange.url, key[:20], signing_key=Ed25519PrivateKey.generate()) as forged:
        with pytest.raises(pmx.AuthenticationError) as e:
            forged.get_account()
        assert e.value.code == "invalid_signature"
