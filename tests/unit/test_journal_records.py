"""The journal's records have one definition (credence/records/journal.py): what the scope steps write,
what the envelope decoder requires and what the Parquet sinks store are its field lists, so a field added
to the journal cannot be written without a column, nor a column wait for a field nobody writes."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.errors import CredenceError
from credence.records.envelope import RECORDS, decode
from credence.records.journal import (
    ARCHIVE,
    ENTRY_KINDS,
    EVENT_FIELDS,
    EVIDENCE,
    FIELDS,
    _record,
    archive_record,
    evidence_record,
)
from credence.sinks.schema import PATH_FIELDS, SCHEMAS, SNAPSHOT_FIELDS, to_row
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import Request, ScopeState
from credence.tables.entries import ARCHIVED, new_reflection
from credence.tables.scope import Scope

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")
SNAPSHOT_COLUMNS = {column for _, column, _ in SNAPSHOT_FIELDS}
SOURCE_COLUMNS = {"snapshot_json", "topic_partition", "offset"}
PART = st.text(st.characters(categories=("L", "N", "Pd")), min_size=1, max_size=12)
INSTANT = st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2099, 1, 1), timezones=st.just(UTC))
OPTIONAL_TEXT = st.none() | st.text(min_size=1, max_size=20)


def _names(table: str) -> list[str]:
    return [f.name for f in FIELDS[table]]


def _stored(record: dict) -> dict:
    """The fields of a record that are columns of their own."""
    return {n: v for n, v in record.items() if n not in PATH_FIELDS}


def _emitted(incarnation: int = 7) -> dict[str, list[dict]]:
    """The journal records a scope step writes: an entry event, a facts event, and an archival."""
    ctx = StepContext(now=NOW, powerful=True, boot="b", memory=MemorySettings(), pipeline=PipelineSettings(),
                      incarnation=incarnation)
    state = ScopeState(scope=SCOPE.key)
    entry = new_reflection("r-1", SCOPE, "The user likes tea.", NOW - timedelta(days=1))
    ctx.put(state, entry, "created", "stage2")
    req = Request(id="stage2-1", task="stage2", payload={}, issued_at=NOW, boot="b")
    ctx.journal_facts(state, req, "facts_failed", "max_request_failures", ["f1"], "it failed")
    ctx.archive(state, replace(entry, status=ARCHIVED, version=2), entry, "sweep")
    out: dict[str, list[dict]] = {EVIDENCE: [], ARCHIVE: []}
    for emit in ctx.emits:
        out[emit.topic.name].append(json.loads(json.dumps(emit.record)))  # as a reader decodes it from the topic
    return out


@pytest.mark.parametrize("table", [EVIDENCE, ARCHIVE])
def test_the_steps_write_exactly_the_fields_the_sinks_store(table):
    records = _emitted()[table]
    assert records, f"the step wrote no {table} record"
    record_columns = [c for c in SCHEMAS[table].names if c not in SNAPSHOT_COLUMNS | SOURCE_COLUMNS]
    for record in records:
        assert list(record) == _names(table)
        # Every field is a column of its own, in the record's order, except the path's and the snapshot's.
        assert record_columns == list(_stored(record))
        row = to_row(table, decode(json.dumps(record), table), 0, 0)
        assert set(row.values) == set(SCHEMAS[table].names)


def test_a_scope_never_forgotten_journals_what_older_workers_did():
    # incarnation 0 is left out: a user never forgotten writes the records (and event ids) of before
    for table, records in _emitted(incarnation=0).items():
        for record in records:
            assert list(record) == [n for n in _names(table) if n != "incarnation"]
            assert "~" not in record.get("event_id", "")
            row = to_row(table, decode(json.dumps(record), table), 0, 0)
            assert row.values["incarnation"] is None


def test_an_incarnation_names_its_event_ids():
    for record in _emitted(incarnation=7)[EVIDENCE]:
        assert record["incarnation"] == 7 and record["event_id"].endswith("~7")


def test_a_candidate_keeps_each_signal_s_event_fields():
    # A field the events gain joins a fact candidate's signals too: update this list with it.
    assert EVENT_FIELDS == ("event_id", "event", "cause", "from_status", "to_status", "at", "score", "tier",
                            "incarnation")


@pytest.mark.parametrize("table", [EVIDENCE, ARCHIVE])
def test_the_decoder_requires_only_fields_the_records_carry(table):
    assert set(RECORDS[table].fields) <= set(_names(table))
    assert RECORDS[table].version_required


def test_a_builder_refuses_a_record_that_is_not_the_journal_s_fields():
    with pytest.raises(CredenceError, match="exactly the fields"):
        _record(ARCHIVE, SCOPE, {"entry_id": "e", "entry_kind": "reflection", "archived_at": NOW, "reason": "x"})
    with pytest.raises(CredenceError, match="exactly the fields"):
        _record(ARCHIVE, SCOPE, {"entry_id": "e", "entry_kind": "reflection", "archived_at": NOW, "reason": "x",
                                 "entry": {}, "extra": 1})


@given(tenant=PART, user=PART, character=PART, kind=st.sampled_from(ENTRY_KINDS), at=INSTANT,
       score=st.none() | st.floats(-1e6, 1e6), cause=OPTIONAL_TEXT, tier=OPTIONAL_TEXT)
def test_an_evidence_record_reads_back_from_its_row(tenant, user, character, kind, at, score, cause, tier):
    scope = Scope(tenant, user, character)
    record = evidence_record(scope, entry_id="e1", entry_kind=kind, event_id="e1@3", event="signal", cause=cause,
                             from_status=None, to_status="confirmed", at=at, score=score, tier=tier,
                             entry={"id": "e1", "kind": kind, **scope.fields(), "version": 3})
    row = to_row(EVIDENCE, decode(json.dumps(record), EVIDENCE), 2, 7)
    assert (row.key.tenant, row.key.kind, row.key.date) == (tenant, kind, at.date().isoformat())
    assert {n: row.values[n] for n in _stored(record)} == _stored(record) | {"at": at}
    assert (row.values["version"], row.values["topic_partition"], row.values["offset"]) == (3, 2, 7)


@given(tenant=PART, user=PART, character=PART, at=INSTANT, reason=st.text(max_size=20))
def test_an_archive_record_reads_back_from_its_row(tenant, user, character, at, reason):
    scope = Scope(tenant, user, character)
    record = archive_record(scope, entry_id="e1", entry_kind="persona", archived_at=at, reason=reason,
                            entry={"id": "e1", "kind": "persona", **scope.fields(), "version": 1})
    row = to_row(ARCHIVE, decode(json.dumps(record), ARCHIVE), 0, 0)
    assert (row.key.tenant, row.key.date) == (tenant, at.date().isoformat())
    assert {n: row.values[n] for n in _stored(record)} == _stored(record) | {"archived_at": at}


def test_a_fold_of_the_journal_keeps_one_life_of_a_scope():
    """One life of a scope: a user forgotten and back again has entries under the forgotten ids, their version lines
    begun again; folding the journal (bridge nominate, memory dedupe) keeps the newest life, or the one named."""
    from credence.streams.runtime.journal import entries_from_journal, one_incarnation
    from credence.tables.entries import changed

    def lived(incarnation: int, text: str, versions: int) -> list[dict]:
        ctx = StepContext(now=NOW, powerful=True, boot="b", memory=MemorySettings(), pipeline=PipelineSettings(),
                          incarnation=incarnation)
        state, entry = ScopeState(scope=SCOPE.key), new_reflection("r-1", SCOPE, text, NOW)
        ctx.put(state, entry, "created", "synthesis")
        for _ in range(versions - 1):
            before = state.entries["r-1"]
            ctx.put(state, changed(before, NOW, importance=before.importance % 10 + 1), "signal", "x", before)
        return [json.loads(json.dumps(e.record)) for e in ctx.emits]

    forgotten, back = lived(0, "The user likes tea.", 3), lived(7, "The user likes tea.", 1)
    journal = forgotten + back
    assert {e.version for e in entries_from_journal(journal)} == {1}  # the new life, not the forgotten v3
    assert {e.version for e in entries_from_journal(journal, incarnation=0)} == {3}
    assert one_incarnation(journal) == back


def test_a_non_ascii_scope_is_found_on_the_scopes_changelog():
    # Faust writes the `scopes` table's keys as JSON with raw UTF-8 (seen on a real changelog): an
    # ASCII-escaped key alone never matched a CJK character's scope, so export and dedupe saw no state.
    from credence.streams.runtime.journal import changelog_keys
    from credence.tables.scope import Scope

    assert b'"acme/kim/\xe5\xb0\x8f\xe5\xa4\xa9"' in changelog_keys(Scope("acme", "kim", "小天"))
    assert b'"acme/kim/aria"' in changelog_keys(Scope("acme", "kim", "aria"))
