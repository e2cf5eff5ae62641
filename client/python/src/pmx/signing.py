"""Signed requests: a key registered with an Ed25519 public key must sign every request (the
API document's "Signed requests"). Pass the private key to the client as ``signing_key=`` and
it signs for you; with the key's prefix alone as ``api_key`` (``pmx_`` and 16 hex digits) it
never sends the secret.

Signing needs the ``cryptography`` package (Debian: python3-cryptography; pip: the SDK's
``signing`` extra), imported only when a client is given a signing key.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from typing import Any, Optional, Union

__all__ = ["Signer", "signed_message", "TIMESTAMP_HEADER", "SIGNATURE_HEADER", "SIGNED_SCHEME"]

TIMESTAMP_HEADER = "PMX-Timestamp"
SIGNATURE_HEADER = "PMX-Signature"
SIGNED_SCHEME = "PMX-Ed25519"

_PREFIX = re.compile(r"pmx_[0-9a-f]{16}")


def signed_message(timestamp: str, method: str, target: str, body: bytes) -> bytes:
    """The exact bytes a key signs: the PMX-Timestamp header's text, the method, the request
    target as sent (path and query, percent-encoded as on the wire) and the lower-case hex
    SHA-256 of the body, joined by newlines, with none after the last."""
    return "\n".join((timestamp, method, target, hashlib.sha256(body).hexdigest())).encode("utf-8")


def _private_key(key: Any) -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    except ImportError:  # pragma: no cover - depends on the machine
        raise ImportError("signing requests needs the cryptography package: install python3-cryptography "
                          "(Debian) or pmx-client[signing] (pip)") from None
    if isinstance(key, Ed25519PrivateKey):
        return key
    if isinstance(key, str):
        key = key.encode("ascii")
    if isinstance(key, (bytes, bytearray)):
        if len(key) == 32:
            return Ed25519PrivateKey.from_private_bytes(bytes(key))
        loaded = serialization.load_pem_private_key(bytes(key), password=None)
        if isinstance(loaded, Ed25519PrivateKey):
            return loaded
        raise ValueError(f"the signing key is a {type(loaded).__name__}, not Ed25519: make one with openssl genpkey -algorithm ed25519")
    raise TypeError("signing_key must be an Ed25519PrivateKey, its 32-byte seed, or its PEM (openssl genpkey -algorithm ed25519)")


class Signer:
    """Signs requests with an Ed25519 private key: a ``cryptography`` Ed25519PrivateKey, its
    32-byte seed, or its PKCS#8 PEM as ``openssl genpkey -algorithm ed25519`` writes it.

    Two identical requests signed in the same millisecond would carry the same signature, which
    the exchange refuses as a replay, so each is signed at a millisecond after the last: the
    timestamps run ahead of the clock only while more than 1000 requests a second are signed,
    and the exchange allows 5 s."""

    def __init__(self, private_key: Union[Any, bytes, str]) -> None:
        self._key = _private_key(private_key)
        self._lock = threading.Lock()
        self._last = 0

    def public_key(self) -> str:
        """The public key as the exchange takes and shows it: standard base64 of its 32 bytes."""
        from cryptography.hazmat.primitives import serialization
        raw = self._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return base64.b64encode(raw).decode("ascii")

    def _timestamp(self, now_ms: Optional[int]) -> str:
        with self._lock:
            now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
            self._last = max(self._last + 1, now)
            return str(self._last)

    def headers(self, method: str, target: str, body: bytes = b"", now_ms: Optional[int] = None) -> dict[str, str]:
        """The PMX-Timestamp and PMX-Signature headers of a request."""
        ts = self._timestamp(now_ms)
        sig = self._key.sign(signed_message(ts, method.upper(), target, body))
        return {TIMESTAMP_HEADER: ts, SIGNATURE_HEADER: base64.b64encode(sig).decode("ascii")}


def authorization(api_key: str, signer: Optional[Signer]) -> str:
    """The Authorization header: a signing key given as its prefix alone sends no secret."""
    if signer is not None and _PREFIX.fullmatch(api_key):
        return f"{SIGNED_SCHEME} {api_key}"
    return f"Bearer {api_key}"
