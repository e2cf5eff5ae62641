"""Series (recurring markets) through both clients, against a `pmx dev` that lists a series of
markets from a manifest, as it lists the sample series by default."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

import pmx
from conftest import ready, run_with
from pmxdev import PmxDev

SERIES = """\
apiVersion: pmx.dev/v1alpha1
kind: MarketSeries
metadata:
  name: py-daily
spec:
  schedule: "0 12 * * *"
  keepListed: 2
  market:
    question: Sunny at noon on {date}?
    category: weather
"""


@pytest.fixture(scope="module")
def lister(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PmxDev]:
    folder: Path = tmp_path_factory.mktemp("manifests")
    (folder / "series").mkdir()
    (folder / "series" / "daily.yaml").write_text(SERIES)
    folder.chmod(0o755)
    dev = PmxDev(["--markets", str(folder)])
    try:
        yield dev
    finally:
        dev.stop()


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_series(lister: PmxDev, flavour: str) -> None:
    key = lister.new_account()[0]

    async def scenario(c: Any) -> None:
        page = await ready(c.list_series())
        assert [s.name for s in page.series] == ["py-daily"] and page.next_cursor is None
        s = page.series[0]
        assert isinstance(s, pmx.Series)
        assert (s.kind, s.schedule, s.time_zone) == ("MARKET", "0 12 * * *", "UTC") and s.next_instance_at is not None
        detail = await ready(c.get_series(s.id))
        assert len(detail.instances) == 2 and all(i.market_id and i.status == "OPEN" for i in detail.instances)
        first = detail.instances[0]
        assert first.name.startswith("py-daily-") and first.closes_at is not None
        market = await ready(c.get_market(first.market_id))
        assert market.series_id == s.id and market.question.startswith("Sunny at noon on ")
        with pytest.raises(pmx.NotFoundError) as refused:
            await ready(c.get_series(str(uuid.uuid4())))
        assert refused.value.code == "series_not_found"

    run_with(flavour, lister.url, key, scenario)
