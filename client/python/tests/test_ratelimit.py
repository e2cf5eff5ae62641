"""Rate limits: a 429 is waited out for its Retry-After and sent again; with retries off it is a
RateLimitedError carrying Retry-After. Against a second `pmx dev` whose limits are tiny."""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

import pmx
from conftest import ready, run_with
from pmxdev import PmxDev

# Writes (and reads) refill at one every two seconds, bursts of one: the second of two quick
# writes is refused, and Retry-After says to wait about 2 s.
LIMITS = ["--write-rate", "0.5", "--write-burst", "1", "--read-rate", "0.5", "--read-burst", "1"]


@pytest.fixture(scope="module")
def limited() -> Iterator[PmxDev]:
    dev = PmxDev(LIMITS)
    try:
        yield dev
    finally:
        dev.stop()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_rate_limited_calls_wait_for_retry_after(limited: PmxDev, flavour: str) -> None:
    key, _ = limited.new_account()
    retries: list[tuple[float, pmx.RetryInfo]] = []

    async def scenario(c: Any) -> None:
        # Quick writes until one is refused; the SDK waits Retry-After and sends it again.
        for _ in range(10):
            state = await ready(c.heartbeat(0))
            assert state.armed is False
            if retries:
                break
        assert retries, "no write was rate limited"
        returned = time.monotonic()
        at, info = retries[0]
        assert (info.status, info.path, info.attempt) == (429, "/heartbeat", 1)
        assert isinstance(info.error, pmx.RateLimitedError) and info.error.code == "rate_limited"
        assert info.error.retry_after is not None and info.error.retry_after >= 1
        assert info.delay == info.error.retry_after  # waited what the exchange said
        assert returned - at >= info.delay * 0.95

    run_with(flavour, limited.url, key, scenario, on_retry=lambda i: retries.append((time.monotonic(), i)))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_without_retries_a_429_is_a_typed_error(limited: PmxDev, flavour: str) -> None:
    key, _ = limited.new_account()

    async def scenario(c: Any) -> None:
        with pytest.raises(pmx.RateLimitedError) as info:
            for _ in range(10):
                await ready(c.heartbeat(0))
        err = info.value
        assert (err.status, err.code) == (429, "rate_limited")
        assert err.retry_after is not None and err.retry_after >= 1
        assert "retry after" in err.message
        assert err.headers.get("ratelimit-limit") == "1"

    run_with(flavour, limited.url, key, scenario, retry=pmx.NO_RETRIES)


def test_limits_are_reported(limited: PmxDev) -> None:
    key, _ = limited.new_account()
    with pmx.Client(limited.url, key) as c:
        limits = c.get_account_limits()
    assert (limits.writes.limited, limits.writes.per_second, limits.writes.burst) == (True, 0.5, 1.0)
    assert (limits.reads.per_second, limits.reads.burst) == (0.5, 1.0)
