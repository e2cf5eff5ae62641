"""Series (recurring markets) through both clients, against a `pmx dev` that lists a series of
markets and a series of events from manifests, as it lists the sample series by default."""

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

EVENT_SERIES = """\
apiVersion: pmx.dev/v1alpha1
kind: MarketSeries
metadata:
  name: py-weekly
spec:
  schedule: "0 12 * * MON"
  event:
    question: Noon weather on {date}?
    category: weather
    outcomes:
    - key: sun
      label: Sun
    - key: rain
      label: Rain
"""


@pytest.fixture(scope="module")
def lister(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PmxDev]:
    folder: Path = tmp_path_factory.mktemp("manifests")
    (folder / "series").mkdir()
    (folder / "series" / "daily.yaml").write_text(SERIES)
    (folder / "series" / "weekly.yaml").write_text(EVENT_SERIES)
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
        assert sorted(s.name for s in page.series) == ["py-daily", "py-weekly"] and page.next_cursor is None
        s = next(s for s in page.series if s.name == "py-daily")
        assert isinstance(s, pmx.Series)
        assert (s.kind, s.schedule, s.time_zone) == ("MARKET", "0 12 * * *", "UTC") and s.next_instance_at is not None
        detail = await ready(c.get_series(s.id))
        assert len(detail.instances) == 2 and all(i.market_id and i.status == "OPEN" for i in detail.instances)
        first = detail.instances[0]
        assert first.name.startswith("py-daily-") and first.closes_at is not None
        market = await ready(c.get_market(first.market_id))
        assert market.series_id == s.id and market.question.startswith("Sunny at noon on ")
        # A series of events: its instance is an event that names it, as its outcomes' markets do.
        weekly = next(s for s in page.series if s.name == "py-weekly")
        assert weekly.kind == "EVENT"
        instances = (await ready(c.get_series(weekly.id))).instances
        assert len(instances) == 1 and instances[0].event_id and instances[0].market_id is None
        event = await ready(c.get_event(instances[0].event_id))
        assert event.series_id == weekly.id and [o.key for o in event.outcomes] == ["sun", "rain"]
        listed = await ready(c.list_events(status="OPEN"))
        assert [e.series_id for e in listed.events if e.id == event.id] == [weekly.id]
        outcome = await ready(c.get_market(event.outcomes[0].market_id))
        assert outcome.series_id == weekly.id
        with pytest.raises(pmx.NotFoundError) as refused:
            await ready(c.get_series(str(uuid.uuid4())))
        assert refused.value.code == "series_not_found"

    run_with(flavour, lister.url, key, scenario)
