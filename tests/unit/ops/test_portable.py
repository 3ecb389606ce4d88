"""The portable export format: export -> import (through the import record and the scope's step) -> export is
the same file; a bad line leaves its scope out whole and names why; a file of another format version is
refused before anything is read."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.errors import DomainError, RecordError
from credence.records.control import import_record
from credence.records.inputs import MAX_INPUT_BYTES, decode_input
from credence.records.topics import TOPICS
from credence.streams.api.cards import Card
from credence.streams.ops.portable import ExportFormatError, header, import_id, lines, parse, selected
from credence.streams.runtime.journal import entries_from_journal
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.step import step
from credence.tables.entries import STATUSES, Entry
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
CARD = Card("acme", "aria", (("card_1", "Aria is a tutor."),), T0)
MEMORY, PIPELINE = MemorySettings(), PipelineSettings()
SCOPES = [Scope("acme", "kim", "aria"), Scope("acme", "kim", "bob"), Scope("acme", "lee", "aria")]

instants = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC))
maybe = st.none() | instants
amount = st.floats(min_value=-3, max_value=30, allow_nan=False, allow_infinity=False)


@st.composite
def entry(draw, scope: Scope, eid: str) -> Entry:
    kind = draw(st.sampled_from(("reflection", "persona")))
    status = draw(st.sampled_from(STATUSES[kind]))
    created = draw(instants)
    ev = Evidence(draw(amount), abs(draw(amount)), draw(maybe), draw(maybe), draw(st.integers(0, 30)),
                  draw(st.none() | st.dates(date(2020, 1, 1), date(2030, 1, 1))), draw(st.integers(0, 9)))
    history = draw(st.lists(st.builds(lambda t, at: {"text": t, "replaced_at": at.isoformat(), "reason": "user_edit",
                                                     "source_fact_id": None}, st.text(min_size=1, max_size=12),
                                      instants), max_size=2))
    return Entry(id=eid, kind=kind, **scope.fields(), text=draw(st.text(min_size=1, max_size=40)),
                 created_at=created, status=status, importance=draw(st.integers(1, 10)), evidence=ev,
                 confirmed_at=draw(maybe), promoted_at=draw(maybe), merged_into_id=draw(st.none() | st.just("p1")),
                 promote_attempts=draw(st.integers(0, 5)), version=draw(st.integers(1, 40)),
                 updated_at=draw(maybe), archived_at=created + timedelta(days=3) if status == "archived" else None,
                 source_fact_ids=tuple(draw(st.lists(st.sampled_from(("f1", "f2", "f3")), unique=True))),
                 version_history=history, tags=draw(st.lists(st.sampled_from(("work", "trip", "家")), unique=True,
                                                             max_size=3)))


@st.composite
def memories(draw) -> list[Entry]:
    out = []
    for scope in draw(st.lists(st.sampled_from(SCOPES), min_size=1, max_size=3, unique=True)):
        for eid in draw(st.lists(st.sampled_from(("r1", "r2", "p1", "p2", "x9")), min_size=1, max_size=4,
                                 unique=True)):
            out.append(draw(entry(scope, eid)))
    return out


def imported(text_lines: list[str]) -> list[Entry]:
    """A fresh app's scopes after the import: each good scope's record through the decoder and the step,
    then folded back from the journal the step wrote, as `credence export` folds it."""
    out = []
    for scope, snapshots in sorted(parse(text_lines).good_scopes().items()):
        raw = json.dumps(import_record(scope, import_id(scope, snapshots), snapshots, "ops", T0)).encode()
        item = decode_input(TOPICS.control, raw)
        ctx = StepContext(now=T0, powerful=True, boot="b", memory=MEMORY, pipeline=PIPELINE)
        step(ScopeState(scope), item, ctx)
        out += entries_from_journal([e.record for e in ctx.emits if e.topic.name == "evidence"])  # one scope's fold
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memories())
def test_export_import_export_is_identical(entries):
    first = lines(header("acme", T0, "credence test"), {"acme": True}, [CARD], entries)
    parsed = parse(first)
    assert parsed.problems == []
    second = lines(header("acme", T0, "credence test"), parsed.switches, parsed.cards, imported(first))
    assert second == first


def _file(entries: list[Entry]) -> list[str]:
    return lines(header("acme", T0, "credence test"), {"acme": False}, [CARD], entries)


def _entries() -> list[Entry]:
    return [Entry(id="r1", kind="reflection", **s.fields(), text="The user likes tea.", created_at=T0,
                  status="pending") for s in SCOPES[:2]]


def test_a_bad_line_leaves_its_scope_out_whole_and_says_why():
    text = _file(_entries())
    broken = json.loads(text[-1])
    broken["entry"]["status"] = "merged"
    extra = json.loads(text[-1]) | {"entry": json.loads(text[-1])["entry"] | {"id": "r2"}}
    text = [*text[:-1], json.dumps(extra), json.dumps(broken), "{not json"]
    parsed = parse(text)
    assert [(p.line, p.scope) for p in parsed.problems] == [(6, "acme/kim/bob"), (7, None)]
    assert "status must be one of" in parsed.problems[0].reason
    assert set(parsed.good_scopes()) == {"acme/kim/aria"}  # bob's good line r2 is not imported either


def test_a_line_naming_another_scope_than_its_entry_is_refused():
    text = _file(_entries()[:1])
    line = json.loads(text[-1]) | {"scope": "acme/kim/bob"}
    (problem,) = parse([*text[:-1], json.dumps(line)]).problems
    assert "belongs to acme/kim/aria" in problem.reason and problem.scope == "acme/kim/bob"


@pytest.mark.parametrize("first, reason", [
    ('{"type":"header","format":"credence-export","format_version":2}', "version 2"),
    ('{"type":"entry"}', "not a credence-export header"),
    ("nope", "not JSON"),
])
def test_another_format_is_refused_before_anything_is_read(first, reason):
    with pytest.raises(ExportFormatError, match=reason):
        parse([first])


def test_the_same_entries_are_the_same_import():
    snaps = [e.to_dict() for e in _entries()[:1]]
    assert import_id("acme/kim/aria", snaps) == import_id("acme/kim/aria", json.loads(json.dumps(snaps)))
    assert import_id("acme/kim/aria", snaps) != import_id("acme/kim/aria", [snaps[0] | {"version": 2}])


def test_an_import_record_is_bounded_by_the_record_limit_not_the_input_limit():
    snaps = [e.to_dict() | {"id": f"r{i}", "text": "x" * 2000} for i, e in enumerate(_entries()[:1] * 300)]
    raw = json.dumps(import_record("acme/kim/aria", "imp-1", snaps, "ops", T0)).encode()
    assert len(raw) > MAX_INPUT_BYTES
    assert decode_input(TOPICS.control, raw).kind == "import"
    bad = json.dumps(import_record("acme/kim/aria", "imp-1", snaps, "ops", T0) | {"entries": {"a": 1}}).encode()
    with pytest.raises(RecordError, match="'entries' must be a list"):
        decode_input(TOPICS.control, bad)


def test_a_selection_is_a_prefix_of_the_scope():
    scope = Scope("acme", "kim", "aria")
    assert selected("acme", scope) and selected("acme/kim", scope) and selected("acme/kim/aria", scope)
    assert not selected("acme/lee", scope) and not selected("acme/kim/bob", scope) and not selected("acm", scope)
    for bad in ("acme/kim/aria/x", "acme//aria", "", "acme/ kim"):
        with pytest.raises(DomainError):
            selected(bad, scope)


def test_a_big_scope_is_cut_into_runs_within_the_budget_in_file_order():
    from credence.streams.ops.portable import chunks, dumps

    snaps = [{"id": f"r{i}", "text": "x" * (i * 37 % 500)} for i in range(200)]
    runs = chunks(snaps, 4000)
    assert [s for run in runs for s in run] == snaps and len(runs) > 1
    assert all(sum(len(dumps(s).encode()) + 1 for s in run) <= 4000 for run in runs)
    assert chunks([{"text": "y" * 9000}], 4000) == [[{"text": "y" * 9000}]]  # alone, never dropped
    assert chunks([], 4000) == []
