"""The recent conversation through the scope step: past the threshold a summarise
request goes out, never holding the scope; its answer replaces the head it summarised, or, when the head
moved meanwhile, is dropped and the scope asks again; with the switch on or off; the same inputs end in the
same state."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.entries import new_reflection
from credence.tables.scope import Scope

from .conftest import T0

MIN = timedelta(minutes=1)
LINES = ["I am learning the cello.", "My teacher is called Anna.", "ok", "I love green tea.",
         "I want to play in a quartet one day.", "thanks!"]


def memory(memory_factory, **kw):
    return memory_factory(recent_compress_threshold_items=6, recent_history_max_items=3, recent_max_items=9, **kw)


def talk(d, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        d.turn(LINES[i % len(LINES)], T0 + i * MIN, role="user" if i % 2 == 0 else "ai")


@pytest.mark.parametrize("powerful", [True, False])
def test_past_the_threshold_the_head_becomes_the_memo_with_the_switch_on_or_off(driver_factory, memory_factory,
                                                                              powerful):
    d = driver_factory(memory=memory(memory_factory), powerful=powerful)
    talk(d, 6)
    assert d.requests_of(TaskName.SUMMARISE) == [] and d.state.recent.memo == ""
    talk(d, 1, start=6)  # the 7th turn: past 6
    (req,) = d.requests_of(TaskName.SUMMARISE)
    assert req.payload["head_ids"] == ["t1", "t2", "t3", "t4", "t5"]  # all but the newest 2
    log = d.state.recent
    assert [t.turn_id for t in log.turns] == ["t6", "t7"] and log.memo_turns == 5 and log.memo_version == 1
    assert "cello" in log.memo and "Anna" in log.memo and '"ok"' not in log.memo  # extractive, small talk left out


def test_a_summary_never_holds_the_scope_and_a_stale_one_is_dropped_and_asked_again(driver_factory,
                                                                                    memory_factory):
    d = driver_factory(memory=memory(memory_factory), auto=False)
    talk(d, 7)
    (first,) = [r for r in d.outbox if r.task == TaskName.SUMMARISE]
    assert not d.state.blocked  # only the summary is in flight (the rules' inline answer aside)
    d.outbox.clear()
    talk(d, 3, start=7)  # 10 turns: the bound (9) drops t1, the head the summary was asked for
    assert d.state.recent.dropped == 1 and [t.turn_id for t in d.state.recent.turns][:1] == ["t2"]
    d.result(first, {"summary": "stale memo"})
    assert d.state.recent.memo == "" and any("head moved" in line for line in d.log)
    (again,) = [r for r in d.outbox if r.task == TaskName.SUMMARISE]
    assert again.id != first.id and again.payload["head_ids"][0] == "t2"
    d.result(again, {"summary": "fresh memo"})
    assert d.state.recent.memo == "fresh memo" and [t.turn_id for t in d.state.recent.turns] == ["t9", "t10"]


def test_turns_that_arrive_while_the_summary_is_out_stay_after_the_memo(driver_factory, memory_factory):
    d = driver_factory(memory=memory(memory_factory), auto=False)
    talk(d, 7)
    (req,) = [r for r in d.outbox if r.task == TaskName.SUMMARISE]
    d.outbox.clear()
    talk(d, 1, start=7)
    assert [r for r in d.outbox if r.task == TaskName.SUMMARISE] == []  # one at a time
    d.result(req, {"summary": "memo"})
    assert [t.turn_id for t in d.state.recent.turns] == ["t6", "t7", "t8"] and d.state.recent.memo == "memo"


def test_the_same_inputs_end_in_the_same_state_and_it_survives_the_changelog(driver_factory, memory_factory):
    runs = []
    for _ in range(2):
        d = driver_factory(memory=memory(memory_factory))
        talk(d, 17)
        runs.append(d.state)
    assert runs[0].recent == runs[1].recent and runs[0].recent.memo_version == 3
    stored = ScopeState.from_dict(runs[0].to_dict())
    assert stored.recent == runs[0].recent


def test_switched_off_by_its_setting_nothing_is_kept_and_old_states_read_back(driver_factory, memory_factory):
    d = driver_factory(memory=memory(memory_factory, recent_memory_enabled=False))
    talk(d, 8)
    assert d.state.recent.empty and d.requests_of(TaskName.SUMMARISE) == []
    assert "recent" not in d.state.control_dict()  # states without a log are stored as before


def test_the_memo_leaves_the_evidence_path_as_it_is(driver_factory, memory_factory):
    """The same conversation with the recent log on and off: the same entries, journal and request ids (a
    summary's request is named by its head, never by the scope's request counter)."""
    runs = {}
    for enabled in (True, False):
        d = driver_factory(memory=memory(memory_factory, recent_memory_enabled=enabled))
        talk(d, 17)
        d.flush()
        runs[enabled] = d
    on, off = runs[True], runs[False]
    assert on.requests_of(TaskName.SUMMARISE) and off.journal()
    assert [r.id for r in on.issued if r.task != TaskName.SUMMARISE] == [r.id for r in off.issued]
    assert on.journal() == off.journal() and on.state.entries == off.state.entries


def test_a_summary_answer_unblocks_no_promotion(driver_factory, memory_factory):
    """Unlike an evidence answer, a summary's says nothing of the evidence path and lands wherever latency
    puts it: a promote_blocked reflection stays blocked (a healthy-backend retry would journal a change)."""
    d = driver_factory(memory=memory(memory_factory), auto=False)
    blocked = replace(new_reflection("r-blocked", Scope.parse(d.state.scope), "The user likes jazz.", T0,
                                     subject="jazz"), status="promote_blocked", last_promote_attempt_at=T0)
    d.state.entries[blocked.id] = blocked
    talk(d, 7)
    (req,) = [r for r in d.outbox if r.task == TaskName.SUMMARISE]
    d.result(req, {"summary": "memo"})
    assert d.state.recent.memo == "memo" and d.state.entries["r-blocked"].status == "promote_blocked"
    assert "promotion_unblocked" not in [e["event"] for e in d.journal()]
