"""The refinement loop through a real worker and broker, one module-scoped run:

- established with powerful memory off and a restatement rule that never fires (so near-duplicates and a
  joined statement are stored, as by an older release), the scope holds "The user loves hiking and has a
  dog named Rex." beside "The user loves hiking." and two "learning French" twins;
- a worker with the defaults and the switch on runs a refine pass on its cadence (event time): the joined
  entry is split (every piece carries its evidence whole, its text in the pieces' version history, the
  source archived), the twins merged (the merge rule over their counters); the next pass merges each
  piece with its twin, again by the rule;
- every refine request was answered once, and the journal folded equals the tables (folding it twice too).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from credence.config.memory import MemorySettings
from credence.streams.ops.worker_process import WorkerProcess
from credence.tables import refine
from credence.tables.clock import parse_instant
from credence.tables.entries import Entry
from tests.integration.test_corrections import produce, turn
from tests.support.pipeline import (
    collect,
    discard,
    flush_and_wait_idle,
    journal_mismatch,
    pipeline_settings,
    request_outcomes,
    topic_values,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

SCOPE = "initech/ivy/guide"
T0 = datetime(2026, 7, 1, 9, 0, tzinfo=UTC)
SAID = ["I love hiking.", "I love hiking and have a dog named Rex.", "I have a dog named Rex.",
        "I'm learning French.", "I'm learning French with a tutor."]
NEVER = MemorySettings(restatement_jaccard=1.0, restatement_containment_min_stems=1000)


def _switch(root, on: bool) -> None:
    (root / "core_config.json").write_text(json.dumps({"powerful_memory_enabled": on}))


def _talk(settings, worker, bootstrap, at: datetime, text: str) -> None:
    produce(settings, "turns", [turn(SCOPE, text, at)])
    flush_and_wait_idle(worker, bootstrap, settings, [SCOPE])


@pytest.fixture(scope="module")
def run(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("refine")
    _switch(root, False)
    old = pipeline_settings(kafka_bootstrap, root, f"r{uuid.uuid4().hex[:10]}", memory=NEVER)
    worker = WorkerProcess(old, kafka_bootstrap, root / "old.log").start()
    try:
        produce(old, "turns", [r for day, text in enumerate(SAID) for r in (
            turn(SCOPE, text, T0 + timedelta(days=day)), turn(SCOPE, "Nice!", T0 + timedelta(days=day, minutes=1), "ai"))])
        flush_and_wait_idle(worker, kafka_bootstrap, old, [SCOPE])
        stored = sorted(e["snapshot"]["text"] for e in worker.get(f"/scope/{SCOPE}")["entries"])
    finally:
        worker.stop()
    _switch(root, True)
    settings = old.model_copy(update={"memory": MemorySettings()})
    worker = WorkerProcess(settings, kafka_bootstrap, root / "new.log").start()
    try:
        last = T0 + timedelta(days=len(SAID))
        _talk(settings, worker, kafka_bootstrap, last, "Thanks!")  # pass 1 (overdue): split, merge
        after_first = collect(worker, kafka_bootstrap, settings, [SCOPE], {})
        _talk(settings, worker, kafka_bootstrap, last + timedelta(hours=1), "Thanks!")  # pass 2: merges
        yield settings, stored, after_first, collect(worker, kafka_bootstrap, settings, [SCOPE], {})
    except BaseException:
        print((root / "new.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        discard(worker)


def _texts(entries: dict[str, Entry]) -> list[str]:
    return sorted(e.text for e in entries.values() if e.status in ("active", "pending", "confirmed"))


def _before(journal: list[dict], entry_id: str, event_id: str) -> Entry:
    """The entry's last snapshot journalled before the event `event_id` (what the refine answer found)."""
    events = [e for e in journal if e["entry_id"] == entry_id]
    upto = next(i for i, e in enumerate(events) if e["event_id"] == event_id)
    return Entry.from_dict(events[upto - 1]["entry"])


def _merges(journal: list[dict]) -> list[dict]:
    return [e for e in journal if e["event"] == "merged" and e["cause"] == "refine_merge"]


def _check_merge(journal: list[dict], merged_event: dict) -> None:
    """The survivor's counters are the merge rule over what the sources held when the answer came."""
    survivor = Entry.from_dict(merged_event["entry"])
    at = parse_instant(merged_event["at"])
    archived = [e for e in journal if e["event"] == "archived" and e["cause"] == "refine_merge"
                and e["entry"]["merged_into_id"] == survivor.id and e["at"] == merged_event["at"]]
    others = [_before(journal, e["entry_id"], e["event_id"]) for e in archived]
    sources = [_before(journal, survivor.id, merged_event["event_id"]), *others]
    expected, gone = refine.merge(sources, survivor.text, at)
    assert survivor.evidence == expected.evidence
    assert survivor.evidence.sub_zero_days == max(s.evidence.sub_zero_days for s in sources)
    assert survivor.evidence.user_fact_reinforce_count == max(s.evidence.user_fact_reinforce_count for s in sources)
    assert [g.merged_into_id for g in gone] == [survivor.id] * len(others)


def test_the_old_release_stored_near_duplicates_and_a_joined_statement(run):
    _, stored, _, _ = run
    assert "The user loves hiking and have a dog named Rex." in stored
    assert {"The user loves hiking.", "The user is learning French.", "The user is learning French with a tutor.",
            "The user has a dog named Rex."} <= set(stored)


def test_a_pass_splits_with_every_counter_and_merges_by_the_rule(run):
    settings, _, first, _ = run
    journal = first.journal
    [split] = [e for e in journal if e["event"] == "archived" and e["cause"] == "refine_split"]
    source = Entry.from_dict(split["entry"])
    pieces = [Entry.from_dict(e["entry"]) for e in journal if e["cause"] == f"refine_split:{source.id}"]
    assert sorted(p.text for p in pieces) == ["The user has a dog named Rex.", "The user loves hiking."]
    for piece in pieces:
        assert piece.evidence == source.evidence  # the split rule: the whole, in every piece
        assert [(v.text, v.reason) for v in piece.version_history][-1] == (source.text, "refine_split")
    assert source.status == "archived" and source.id in {a["entry_id"] for a in first.archive}
    [merge] = _merges(journal)
    _check_merge(journal, merge)
    assert Entry.from_dict(merge["entry"]).text == "The user is learning French with a tutor."


def test_the_next_pass_merges_each_piece_with_its_twin_and_the_journal_replays_to_the_tables(run):
    settings, _, first, last = run
    merges = _merges(last.journal)[len(_merges(first.journal)):]
    assert len(merges) == 2
    for merge in merges:
        _check_merge(last.journal, merge)
    assert _texts(last.entries) == ["The user has a dog named Rex.", "The user is learning French with a tutor.",
                                    "The user loves hiking."]
    assert journal_mismatch(last) == {}
    results, failed = request_outcomes(settings.kafka_bootstrap, settings)
    # The rules backend answers in process (no result record); any answer on the log was applied once.
    assert all(n == 1 for k, n in results.items() if "|refine-" in k) and not failed
    assert {e["event"] for e in topic_values(settings.kafka_bootstrap, settings, "evidence")
            if e["cause"].startswith("refine")} == {"created", "merged", "archived"}
