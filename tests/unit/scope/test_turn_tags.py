"""Tenant tags in the pure step: entries inherit the tags of the turns their facts came from, and a turn
remembers the entries it touched (its `extracted` answer)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from credence.streams.scope import turn_status
from credence.tables.clock import format_instant

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def tagged(d, text: str, at: datetime, turn_id: str, tags: list[str] | None):
    record = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria", "turn_id": turn_id, "role": "user",
              "text": text, "ts": format_instant(at)}
    if tags is not None:
        record["metadata"] = {"tags": tags}
    return d.step("turn", record, at)


def test_entries_inherit_their_turns_tags_and_each_turn_names_the_entries_it_touched(driver_factory):
    d = driver_factory()
    tagged(d, "I love hiking in the mountains.", T0, "t1", ["outdoors", "profile"])
    tagged(d, "I work as a nurse at the city hospital.", T0 + timedelta(minutes=1), "t2", ["work"])
    tagged(d, "I have a cat called Miso.", T0 + timedelta(minutes=2), "t3", None)
    d.flush()
    by_text = {e.text: e for e in d.state.entries.values()}
    hiking = next(e for t, e in by_text.items() if "hiking" in t)
    nurse = next(e for t, e in by_text.items() if "nurse" in t)
    cat = next(e for t, e in by_text.items() if "Miso" in t or "cat" in t)
    assert hiking.tags == ("outdoors", "profile") and nurse.tags == ("work",) and cat.tags == ()
    assert hiking.id in d.state.turn_entries["t1"] and nurse.id in d.state.turn_entries["t2"]
    assert nurse.id not in d.state.turn_entries["t1"]
    for turn_id in ("t1", "t2", "t3"):
        assert turn_status.turn_state(d.state, turn_id, 0, -1) == turn_status.EXTRACTED
    assert not d.state.facts  # tags ride beside their facts only while a fact has work left
