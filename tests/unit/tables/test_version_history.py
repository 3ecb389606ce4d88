"""An entry's version history (tables/version_history.py, entries.rewrite_text): a rewrite keeps the id and
the counters, keeps what the text said before, at most version_history_max items, and never touches a card."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.errors import DomainError
from credence.tables.entries import Entry, new_persona_entry, rewrite_text
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope
from credence.tables.version_history import CORRECTION_MERGE, USER_EDIT, Version, appended, read_history

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")
EVIDENCE = Evidence(2.5, 0.5, T0, T0, 1, date(2026, 3, 1), 3)


def persona(text: str = "The user lives in Berlin.", **kw) -> Entry:
    return new_persona_entry("p1", SCOPE, text, T0, evidence=EVIDENCE, merged_from_ids=("r1",), **kw)


def test_a_rewrite_keeps_id_and_counters_and_the_old_text():
    before = persona()
    after = rewrite_text(before, "The user lives in Lisbon.", T0 + timedelta(days=1), reason=CORRECTION_MERGE,
                         source_fact_id="f9")
    assert after.id == before.id and after.evidence == before.evidence
    assert after.merged_from_ids == before.merged_from_ids and after.created_at == before.created_at
    assert after.text == "The user lives in Lisbon." and after.version == before.version + 1
    assert after.version_history == (Version("The user lives in Berlin.", T0 + timedelta(days=1),
                                             CORRECTION_MERGE, "f9"),)


def test_the_same_text_again_changes_nothing():
    before = persona()
    assert rewrite_text(before, "  The user lives in Berlin. ", T0, reason=USER_EDIT) is before


def test_a_card_entry_is_never_rewritten():
    with pytest.raises(DomainError, match="protected"):
        rewrite_text(persona(protected=True), "other", T0, reason=USER_EDIT)


def test_an_empty_text_is_refused():
    with pytest.raises(DomainError, match="non-empty"):
        rewrite_text(persona(), "   ", T0, reason=USER_EDIT)


def test_the_history_round_trips_through_the_snapshot():
    after = rewrite_text(persona(), "The user lives in Lisbon.", T0, reason=USER_EDIT)
    wire = after.to_dict()
    assert wire["version_history"] == [{"text": "The user lives in Berlin.", "replaced_at": "2026-03-01T12:00:00+00:00",
                                        "reason": "user_edit", "source_fact_id": None}]
    assert Entry.from_dict(wire) == after


def test_a_snapshot_without_the_field_reads_as_empty():
    wire = persona().to_dict()
    del wire["version_history"]
    assert Entry.from_dict(wire).version_history == ()


@pytest.mark.parametrize("bad", ["text", {"text": "x"}, [{"text": "x", "reason": "r"}],
                                 [{"text": "x", "replaced_at": "2026-03-01T12:00:00Z", "reason": ""}]])
def test_a_malformed_history_is_refused_by_name(bad):
    wire = persona().to_dict() | {"version_history": bad}
    with pytest.raises(DomainError, match="version"):
        Entry.from_dict(wire)


def test_read_history_takes_versions_and_dicts():
    v = Version("a", T0, USER_EDIT)
    assert read_history([v, v.to_dict()]) == (v, v) and read_history(None) == ()


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(alphabet="abcde ", min_size=1, max_size=6).filter(str.strip), min_size=1,
                      max_size=12), limit=st.integers(1, 6))
def test_history_is_bounded_and_keeps_the_newest(texts, limit):
    memory = MemorySettings(version_history_max=limit)
    entry, replaced = persona(), []
    for i, text in enumerate(texts):
        after = rewrite_text(entry, text, T0 + timedelta(hours=i), reason=USER_EDIT, settings=memory)
        if after is not entry:
            replaced.append(entry.text)
        entry = after
        assert len(entry.version_history) <= limit
        assert entry.evidence == EVIDENCE and entry.id == "p1"
    assert [v.text for v in entry.version_history] == replaced[-limit:]


def test_appended_refuses_a_bad_limit():
    with pytest.raises(DomainError, match="limit"):
        appended((), Version("a", T0, USER_EDIT), 0)
