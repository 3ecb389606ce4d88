"""The refinement loop in the scope step: asked on its cadence in event time (only with powerful memory
on), applied by tables.refine's rules, journalled, deterministic on replay, never touching a protected
entry, and leaving alone a member that changed since the cluster was asked about."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import timedelta

import pytest

from credence.streams.scope import refine
from credence.streams.scope.context import StepContext
from credence.streams.scope.tasks import TaskName
from credence.tables.clock import format_instant
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence, effective_disputation, effective_reinforcement
from credence.tables.scope import Scope
from tests.unit.scope.conftest import T0, run_request

S = Scope("acme", "u1", "aria")
EV = Evidence(reinforcement=1.4, disputation=0.3, rein_last_signal_at=T0, disp_last_signal_at=T0 - timedelta(days=9),
              sub_zero_days=2, user_fact_reinforce_count=3)
EV2 = Evidence(reinforcement=0.6, disputation=1.2, rein_last_signal_at=T0 - timedelta(days=40),
               disp_last_signal_at=T0, sub_zero_days=5, user_fact_reinforce_count=1)
LATER = T0 + timedelta(hours=1)  # past refine_cron_interval_seconds (1800 s)


def _seed(state) -> None:
    for e in (new_persona_entry("p-mix", S, "The user loves hiking and has a dog named Rex.", T0, evidence=EV),
              new_persona_entry("p-rex", S, "The user owns a dog named Rex.", T0, evidence=EV2),
              new_persona_entry("p-fr", S, "The user is learning French.", T0, evidence=EV),
              replace(new_reflection("r-fr", S, "The user is learning French with a tutor.", T0), evidence=EV2),
              new_persona_entry("card", S, "The user is learning French.", T0, protected=True),
              new_persona_entry("p-home", S, "The user lives in Montreal.", T0, evidence=EV)):
        state.entries[e.id] = e


def _driver(driver_factory, **kw):
    d = driver_factory(**kw)
    _seed(d.state)
    d.tick(T0)  # the scope's first step: the loop's clock starts here
    return d


def test_no_pass_before_the_interval_nor_with_the_switch_off(driver_factory):
    d = _driver(driver_factory)
    d.tick(T0 + timedelta(minutes=29))
    assert d.requests_of(TaskName.REFINE) == []
    off = _driver(driver_factory, powerful=False)
    off.tick(LATER)
    assert off.requests_of(TaskName.REFINE) == []


def test_a_pass_splits_and_merges_by_the_rule_and_journals_every_change(driver_factory):
    d = _driver(driver_factory)
    d.tick(LATER)
    asked = sorted(sorted(r.payload["versions"]) for r in d.requests_of(TaskName.REFINE))
    assert asked == [["p-fr", "r-fr"], ["p-mix", "p-rex"]]  # one request per cluster; the card in none
    live = {e.id: e for e in d.state.entries.values() if e.status in ("active", "pending")}
    pieces = sorted((e for e in live.values() if e.id.startswith("refined-")), key=lambda e: e.text)
    assert [p.text for p in pieces] == ["The user has a dog named Rex.", "The user loves hiking."]
    assert all(p.evidence == EV for p in pieces)  # the split rule: every piece carries the source's evidence
    assert {v.text for p in pieces for v in p.version_history} == {"The user loves hiking and has a dog named Rex."}
    merged = live["p-fr"]  # persona survives a reflection; the richer text
    assert merged.text == "The user is learning French with a tutor." and merged.merged_from_ids == ("r-fr",)
    assert [(v.text, v.reason) for v in merged.version_history] == [
        ("The user is learning French with a tutor.", "refine_merge"), ("The user is learning French.", "refine_merge")]
    # the merge rule: lifetime tallies the larger (the sweep may have counted a day more since), each
    # counter the larger read-time side on its own curve
    assert merged.evidence.sub_zero_days >= 5 and merged.evidence.user_fact_reinforce_count == 3
    at = LATER + timedelta(days=10)
    assert effective_disputation(merged.evidence, at) == pytest.approx(effective_disputation(EV2, at))
    assert effective_reinforcement(merged.evidence, at) == pytest.approx(effective_reinforcement(EV, at))
    assert d.state.entries["card"].version == 1  # the protected twin never touched
    archived = {a["entry_id"]: a for a in d.archives()}
    assert set(archived) == {"p-mix", "r-fr"} and archived["r-fr"]["entry"]["merged_into_id"] == "p-fr"
    causes = {(j["entry_id"], j["event"], j["cause"]) for j in d.journal()}
    assert {("p-mix", "archived", "refine_split"), ("r-fr", "archived", "refine_merge"),
            ("p-fr", "merged", "refine_merge")} <= causes
    assert {(p.id, "created", "refine_split:p-mix") for p in pieces} <= causes


def test_replaying_the_recorded_answers_ends_in_the_same_state_without_asking(driver_factory):
    d = _driver(driver_factory, auto=False)
    d.tick(LATER)
    reqs = [r for r in d.outbox if r.task == TaskName.REFINE]
    before, seen = copy.deepcopy(d.state), len(d.journal())
    recorded = [run_request(r) for r in reqs]  # the answers as their result records carry them
    for req, output in zip(reqs, recorded):
        d.result(req, output)
    replay = driver_factory(state=before, auto=False)
    for req, output in zip(reqs, recorded):
        replay.result(req, output)
    assert replay.state.entries == d.state.entries and replay.state.refined == d.state.refined
    assert [j["event_id"] for j in replay.journal()] == [j["event_id"] for j in d.journal()[seen:]]
    assert replay.issued == []  # nothing asked again


def test_an_answer_about_a_member_that_changed_meanwhile_leaves_it_alone(driver_factory):
    d = _driver(driver_factory, auto=False)
    d.tick(LATER)
    reqs = [r for r in d.outbox if r.task == TaskName.REFINE]
    req = reqs[0]
    ids = sorted(req.payload["versions"])
    d.state.entries[ids[0]] = replace(d.state.entries[ids[0]], version=d.state.entries[ids[0]].version + 1)
    ctx = d.result(req, {"actions": [{"action": "merge", "source_ids": ids, "texts": [], "reason": ""},
                                     {"action": "discard", "source_ids": ["card"], "texts": [], "reason": ""}]})
    assert all(d.state.entries[i].status in ("active", "pending") for i in ids)
    assert d.state.entries["card"].status == "active"
    assert ctx.refused == {"refine:stale_or_unknown_source": 2}


def test_an_answered_cluster_is_not_asked_again_until_its_revisit_time(driver_factory, memory_factory):
    d = driver_factory(memory=memory_factory(refine_revisit_after_days=2))
    for e in (new_persona_entry("a", S, "The user has a cat.", T0), new_persona_entry("b", S, "The user has a cat named Tom.", T0)):
        d.state.entries[e.id] = e
    d.tick(T0)
    d.state.entries["b"] = new_persona_entry("b", S, "The user has a cat named Tom.", T0)
    d.auto = False
    d.tick(LATER)
    [req] = d.requests_of(TaskName.REFINE)
    d.result(req, {"actions": []})  # nothing to do
    d.tick(LATER + timedelta(hours=5))
    assert len(d.requests_of(TaskName.REFINE)) == 1
    d.tick(LATER + timedelta(days=3))
    assert len(d.requests_of(TaskName.REFINE)) == 2


def test_a_result_after_the_switch_went_off_is_dropped_unread(driver_factory):
    d = _driver(driver_factory, auto=False)
    d.tick(LATER)
    [req, *_] = [r for r in d.outbox if r.task == TaskName.REFINE]
    d.powerful = False
    d.result(req, {"actions": [{"action": "discard", "source_ids": sorted(req.payload["versions"])[:1],
                                "texts": [], "reason": ""}]})
    assert not d.archives()
    assert req.id not in d.state.requests


def test_clusters_are_deterministic_and_leave_out_protected_entries(driver_factory):
    d = driver_factory()
    _seed(d.state)
    ctx = StepContext(now=T0, powerful=True, boot="b", memory=d.memory, pipeline=d.pipeline)
    got = [[e.id for e in c] for c in refine.clusters(d.state, ctx)]
    assert got == [["p-fr", "r-fr"], ["p-mix", "p-rex"]]
    d.state.entries = dict(reversed(list(d.state.entries.items())))
    assert [[e.id for e in c] for c in refine.clusters(d.state, ctx)] == got


def test_an_overdue_pass_runs_when_the_switch_comes_on_and_the_answered_set_stays_bounded(driver_factory):
    d = _driver(driver_factory, powerful=False, auto=False)
    d.state.refined = {f"h{i:04d}": format_instant(T0 - timedelta(minutes=i)) for i in range(300)}
    d.tick(T0 + timedelta(days=3))
    assert d.requests_of(TaskName.REFINE) == []  # off: no pass, however overdue
    d.powerful = True
    d.tick(T0 + timedelta(days=3, minutes=1))
    assert len(d.requests_of(TaskName.REFINE)) == 2
    assert len(d.state.refined) == refine.REFINED_MAX and "h0000" in d.state.refined  # the newest kept


def test_a_refine_call_that_keeps_failing_is_dead_lettered_and_the_scope_moves_on(driver_factory):
    d = _driver(driver_factory, auto=False)
    d.tick(LATER)
    req = [r for r in d.outbox if r.task == TaskName.REFINE][0]
    for _ in range(d.pipeline.max_request_failures):
        d.fail(req, "HTTP 422 refused")
    assert req.id not in d.state.requests
    [dlq] = [e.record for e in d.emits if e.topic.name == "dlq"]
    assert "refine request failed" in dlq["reason"] and "HTTP 422 refused" in dlq["reason"]
    assert req.payload["cluster"] not in d.state.refined  # not answered: asked again in a later pass
