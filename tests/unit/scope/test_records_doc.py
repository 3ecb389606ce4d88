"""docs/records.md lists every journal event a step can emit, and the funnel counts the lifecycle ones."""

from __future__ import annotations

import re
from pathlib import Path

from credence.sinks.analytics import FUNNEL_SELECT
from credence.streams.scope.context import JOURNAL_EVENTS

RECORDS = (Path(__file__).resolve().parents[3] / "docs" / "records.md").read_text()


def test_the_records_doc_lists_every_journal_event():
    table = re.findall(r"^\| (\w+) \|", RECORDS, flags=re.MULTILINE)
    assert set(table) - {"event"} == set(JOURNAL_EVENTS)
    schema = RECORDS[RECORDS.index('"event":'):RECORDS.index('"cause":')]
    assert set(re.findall(r'"(\w+)"', schema)) - {"event"} == set(JOURNAL_EVENTS)


def test_the_funnel_counts_every_lifecycle_outcome():
    for event in ("created", "merged", "archived", "promotion_rejected", "promotion_unblocked", "promotion_dropped",
                  "stage2_dropped", "facts_failed"):
        assert f"event = '{event}'" in FUNNEL_SELECT
    for status in ("confirmed", "promoted", "denied", "promote_blocked"):
        assert f"to_status = '{status}'" in FUNNEL_SELECT


def test_an_undocumented_event_is_refused(driver_factory):
    import pytest

    from credence.errors import CredenceError

    d = driver_factory()
    d.turn("I love hiking", __import__("datetime").datetime(2026, 3, 2, tzinfo=__import__("datetime").UTC))
    d.flush()
    (entry,) = d.reflections()
    from credence.streams.scope.context import StepContext
    ctx = StepContext(now=entry.created_at, powerful=True, boot="b", memory=d.memory, pipeline=d.pipeline)
    with pytest.raises(CredenceError, match="not one of"):
        ctx.journal(entry, "promoted_by_magic", "x")
