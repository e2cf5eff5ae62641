"""Fixtures: one real `pmx dev` for the session, fresh accounts and markets for each test."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Awaitable, Callable, Iterator, TypeVar, Union

import pytest

import pmx

from faultproxy import FaultProxy
from pmxdev import PmxDev

T = TypeVar("T")


@pytest.fixture(scope="session")
def exchange() -> Iterator[PmxDev]:
    dev = PmxDev()
    try:
        yield dev
    finally:
        dev.stop()


@pytest.fixture
def key(exchange: PmxDev) -> str:
    """The API key of a fresh account."""
    return exchange.new_account()[0]


@pytest.fixture
def other_key(exchange: PmxDev) -> str:
    return exchange.new_account()[0]


@pytest.fixture
def market(exchange: PmxDev) -> str:
    """A fresh OPEN market's id."""
    return exchange.new_market()


@pytest.fixture
def client(exchange: PmxDev, key: str) -> Iterator[pmx.Client]:
    with pmx.Client(exchange.url, key) as c:
        yield c


@pytest.fixture
def proxy(exchange: PmxDev) -> Iterator[FaultProxy]:
    p = FaultProxy(exchange.url)
    try:
        yield p
    finally:
        p.close()


async def ready(value: Union[T, Awaitable[T]]) -> T:
    """The value of a sync client's call, or of an async client's awaited: lets one scenario run
    with both clients."""
    if inspect.isawaitable(value):
        return await value  # type: ignore[no-any-return]
    return value  # type: ignore[return-value]


def run_with(flavour: str, url: str, key: str, scenario: Callable[[Any], Awaitable[None]], **kwargs: Any) -> None:
    """Runs ``scenario(client)`` with a sync Client or an AsyncClient (``flavour``)."""

    async def main() -> None:
        if flavour == "sync":
            with pmx.Client(url, key, **kwargs) as c:
                await scenario(c)
        else:
            async with pmx.AsyncClient(url, key, **kwargs) as ac:
                await scenario(ac)

    asyncio.run(main())
