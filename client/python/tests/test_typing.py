"""The SDK is typed: mypy --strict passes on it, and sees what each client method returns (the
answer for Client, an awaitable of it for AsyncClient) and what arguments it takes."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

SDK = Path(__file__).resolve().parents[1]

USAGE = '''
import pmx
from typing import reveal_type

def sync(c: pmx.Client) -> None:
    reveal_type(c.place_order("m", "BUY", "YES", 40, 10))
    reveal_type(c.cancel_everything())
    c.place_order("m", "BUY", "YES", 40)  # E: missing quantity

async def aio(c: pmx.AsyncClient) -> None:
    reveal_type(c.get_order_book("m"))
    reveal_type(await c.place_orders([pmx.OrderRequest("m", "BUY", "YES", 40, 1)]))
    async with c.feed() as feed:
        reveal_type(await feed.recv())
'''


def test_mypy_strict() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        usage = Path(tmp) / "usage.py"
        usage.write_text(USAGE)
        out = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(Path(tmp) / "cache"),
             "--no-error-summary", str(SDK / "src" / "pmx"), str(usage)],
            capture_output=True, text=True, timeout=300, env={"MYPYPATH": str(SDK / "src"), "PATH": "/usr/bin:/bin"},
        )
    lines = [line.split(": ", 1)[1] for line in out.stdout.splitlines() if line.startswith(str(usage))]
    assert [line for line in out.stdout.splitlines() if not line.startswith(str(usage))] == [], out.stdout + out.stderr
    assert lines == [
        'note: Revealed type is "pmx.models.PlacedOrder"',
        'note: Revealed type is "builtins.list[pmx.models.Order]"',
        'error: Too few arguments  [call-arg]',
        'note: Revealed type is "typing.Awaitable[pmx.models.OrderBookSnapshot]"',
        'note: Revealed type is "builtins.list[pmx.models.BatchResult]"',
        'note: Revealed type is "Union[pmx.feed.BookSnapshot, pmx.feed.MarketEvents, pmx.feed.Ticker, '
        'pmx.feed.MarketChange, pmx.feed.AccountEvents, pmx.feed.Heartbeat, pmx.feed.Reconnected, '
        'pmx.feed.GapDetected, pmx.feed.Resynced, pmx.feed.SubscriptionLost]"',
    ], out.stdout + out.stderr
