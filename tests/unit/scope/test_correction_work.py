"""Correction work through step() with the rules backend: a promotion on the topic of an
existing persona entry is queued against that entry's id and decided by the correction task; a rewrite
keeps the id and counters and the replaced text, keep_new archives the old entry with its history, a card
entry is never a target, and failures back off, then dead-letter with the reason."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.streams.llm.rules.correction_work import decide
from credence.streams.scope import corrections
from credence.streams.scope.requests import reflection_id
from credence.tables.entries import Entry, new_persona_entry
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
MIN = timedelta(minutes=1)
OLD_EVIDENCE = Evidence(reinforcement=3.0, disputation=0.5, rein_last_signal_at=T0, disp_last_signal_at=T0,
                        user_fact_reinforce_count=4)


def held_persona(d, text: str, entry_id: str = "p-old", **kw):
    entry = new_persona_entry(entry_id, Scope.parse(SCOPE), text, T0, subject=kw.pop("subject", "somewhere-else"),
                              evidence=kw.pop("evidence", OLD_EVIDENCE), **kw)
    d.state.entries[entry.id] = entry
    return entry


def promote(d, said: str, text: str, old: str | None = None, **kw):
    """The user says `said` (a reflection `text`); then a persona entry `old` appears (an entry promoted
    meanwhile: the reflection was synthesised before it, so synthesis had nothing to correct); the
    reflection is confirmed twice, so merge-on-promote is asked."""
    d.turn(said, T0)
    d.flush()
    rid = reflection_id(SCOPE, text)
    assert rid in d.state.entries, sorted(d.state.entries)
    if old is not None:
        held_persona(d, old, **kw)
    d.feedback(rid, "confirm", T0 + MIN)
    d.feedback(rid, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    return rid


def test_a_new_value_is_queued_against_the_entry_and_replaces_it_keeping_its_history(driver_factory):
    d = driver_factory()
    rid = promote(d, "I live in Lisbon.", "The user lives in Lisbon.", old="The user lives in Berlin.")
    old = d.state.entries.get("p-old") or Entry.from_dict(d.archives()[0]["entry"])
    (req,) = d.requests_of("correction")
    (item,) = req.payload["corrections"]
    assert item["old"]["id"] == old.id and item["new_text"] == "The user lives in Lisbon."
    # keep_new: the old entry is archived (never deleted) and the new one opens with its text in its history
    assert old.id not in d.state.entries
    (archived,) = d.archives()
    assert archived["entry_id"] == old.id and archived["entry"]["text"] == "The user lives in Berlin."
    (persona,) = d.personas()
    assert persona.text == "The user lives in Lisbon." and persona.merged_from_ids == (rid,)
    (version,) = persona.version_history
    assert (version.text, version.reason) == ("The user lives in Berlin.", "correction_keep_new")
    assert version.source_fact_id in d.state.entries[rid].source_fact_ids
    assert d.state.entries[rid].status == "promoted" and d.state.corrections == []
    causes = {j["cause"] for j in d.journal()}
    assert {f"correction_keep_new:{persona.id}", "correction_keep_new"} <= causes


def queued(d, old: str = "The user lives in Berlin.", said: str = "I live in Lisbon.",
           text: str = "The user lives in Lisbon."):
    """As promote(), answering each request in turn, until the correction request is outstanding."""
    d.auto = False
    d.turn(said, T0)
    d.flush()
    d.pump()
    rid = reflection_id(SCOPE, text)
    held_persona(d, old)
    d.feedback(rid, "confirm", T0 + MIN)
    d.pump()
    d.feedback(rid, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    d.pump_one()  # the promotion: queued as a correction, which is asked at once
    (req,) = [r for r in d.outbox if r.task == "correction"]
    d.outbox.remove(req)
    return rid, req


def answer(d, req, action: str, text: str = ""):
    (item,) = req.payload["corrections"]
    return d.result(req, {"decisions": [{"id": item["id"], "action": action, "text": text}]})


def test_a_merge_keeps_the_id_and_counters_and_the_replaced_text(driver_factory):
    d = driver_factory()
    rid, req = queued(d)
    old = d.state.entries["p-old"]
    assert d.state.entries[rid].status == "confirmed"  # waits for the decision, no second promotion
    before, reflection = d.state.entries[old.id], d.state.entries[rid]
    answer(d, req, "merge", "The user lived in Berlin and now lives in Lisbon.")
    (persona,) = d.personas()
    assert persona.id == old.id and persona.text == "The user lived in Berlin and now lives in Lisbon."
    # counters kept: merge-on-promote's rule (the larger of the two, at now) loses neither side's
    kept, new = before.evidence, reflection.evidence
    assert persona.evidence.reinforcement == pytest.approx(max(kept.reinforcement, new.reinforcement), rel=1e-3)
    assert persona.evidence.disputation == pytest.approx(max(kept.disputation, new.disputation), rel=1e-3)
    assert persona.evidence.user_fact_reinforce_count == max(kept.user_fact_reinforce_count,
                                                             new.user_fact_reinforce_count)
    (version,) = persona.version_history
    assert (version.text, version.reason) == ("The user lives in Berlin.", "correction_merge")
    assert d.state.entries[rid].merged_into_id == old.id and d.archives() == []


def test_keep_old_rejects_the_promotion_and_leaves_the_entry(driver_factory):
    d = driver_factory()
    rid, req = queued(d)
    old = d.state.entries["p-old"]
    before = d.state.entries[old.id]
    answer(d, req, "keep_old")
    assert d.state.entries[old.id] == before and [p.id for p in d.personas()] == [old.id]
    reflection = d.state.entries[rid]
    assert reflection.status == "confirmed" and reflection.promotion_rejected_at is not None
    assert [j["cause"] for j in d.journal() if j["event"] == "promotion_rejected"] == ["correction_keep_old"]


def test_a_history_never_grows_past_its_bound(driver_factory, memory_factory):
    from credence.tables.version_history import Version

    d = driver_factory(memory=memory_factory(version_history_max=2))
    rid, req = queued(d)
    old = d.state.entries["p-old"]
    d.state.entries[old.id] = replace(old, version_history=(Version("The user lives in Rome.", T0, "user_edit"),
                                                            Version("The user lives in Paris.", T0, "user_edit")))
    answer(d, req, "keep_new")
    (persona,) = d.personas()
    assert [v.text for v in persona.version_history] == ["The user lives in Paris.", "The user lives in Berlin."]


def test_an_item_the_model_leaves_out_is_asked_again(driver_factory):
    d = driver_factory()
    rid, req = queued(d)
    d.result(req, {"decisions": []})
    assert len(d.state.corrections) == 1 and d.state.corrections[0]["asked"] == 1
    (again,) = [r for r in d.outbox if r.task == "correction"]
    assert again.payload == req.payload


def test_a_similar_topic_without_contradiction_keeps_both(driver_factory):
    d = driver_factory()
    promote(d, "I love green tea.", "The user loves green tea.", old="The user loves coffee.")
    assert len(d.requests_of("correction")) == 1
    assert sorted(p.text for p in d.personas()) == ["The user loves coffee.", "The user loves green tea."]
    assert all(p.version_history == () for p in d.personas())


def test_a_card_entry_is_never_a_target(driver_factory):
    d = driver_factory()
    promote(d, "I live in Lisbon.", "The user lives in Lisbon.", old="The user lives in Berlin.", entry_id="card-1",
            protected=True, evidence=Evidence())
    card = d.state.entries["card-1"]
    assert d.requests_of("correction") == []
    assert d.state.entries[card.id] == card


def test_an_unrelated_promotion_is_not_queued(driver_factory):
    d = driver_factory()
    promote(d, "I love hiking.", "The user loves hiking.", old="The user lives in Berlin.")
    assert d.requests_of("correction") == []


def test_with_correction_work_off_a_new_value_takes_the_seed_s_own_path(driver_factory, memory_factory):
    d = driver_factory(memory=memory_factory(correction_work_enabled=False))
    held_persona(d, "The user loves living in Berlin.")
    d.turn("I live in Lisbon now.", T0)
    d.flush()
    assert d.requests_of("correction") == [] and reflection_id(SCOPE, "The user lives in Lisbon.") in d.state.entries


def test_a_failing_call_backs_off_then_dead_letters_and_blocks_the_promotion(driver_factory, pipeline_factory):
    d = driver_factory(pipeline=pipeline_factory(max_request_failures=2))
    rid, req = queued(d)
    old = d.state.entries["p-old"]
    before = d.state.entries[old.id]
    d.fail(req)
    assert d.state.requests[req.id].failed and d.state.corrections  # re-issued on the next step
    d.fail(req)
    (dead,) = [e.record for e in d.emits if e.topic.name == "dlq"]
    assert "correction request failed 2 times" in dead["reason"]
    assert d.state.corrections == [] and d.state.entries[rid].status == "promote_blocked"
    assert d.state.entries[old.id] == before  # nothing half-applied


def test_a_replay_of_the_same_result_changes_nothing(driver_factory):
    d = driver_factory()
    rid, req = queued(d)
    answer(d, req, "keep_new")
    after = {k: e.to_dict() for k, e in d.state.entries.items()}
    emitted = len(d.emits)
    answer(d, req, "keep_old")  # the same result record again (at-least-once), whatever it says
    assert any("stale result" in line for line in d.log)
    assert {k: e.to_dict() for k, e in d.state.entries.items()} == after and len(d.emits) == emitted


def test_the_switch_off_keeps_the_queue_for_later(driver_factory):
    d = driver_factory()
    rid, req = queued(d)
    d.powerful = False
    d.step("result", {"request_id": req.id, "task": req.task, "output": {"decisions": []}})
    assert req.id not in d.state.requests and len(d.state.corrections) == 1
    d.powerful, d.auto = True, True
    d.tick(T0 + 3 * MIN)
    assert d.state.corrections == [] and [p.text for p in d.personas()] == ["The user lives in Lisbon."]


@pytest.mark.parametrize(("old", "new", "action"), [
    ("The user lives in Berlin.", "The user lives in Lisbon.", "keep_new"),
    ("The user loves living in Berlin.", "The user lives in Lisbon.", "keep_new"),
    ("The user has a cat named Mitten.", "The user's cat is named Miso, not Mitten.", "keep_new"),
    ("The user loves coffee.", "The user does not drink coffee.", "keep_new"),
    ("The user works as a nurse.", "The user works as a teacher.", "keep_new"),
    ("The user loves coffee.", "The user loves green tea.", "keep_both"),
    ("The user has a cat named Mitten.", "The user has a dog named Rex.", "keep_both"),
    ("The user enjoys hiking.", "The user enjoys hiking in the Alps.", "merge"),
    ("The user lives in Berlin with their husband.", "The user lives in Berlin.", "keep_old"),
])
def test_the_rules_decision(old, new, action):
    assert decide(old, new)[0] == action


WORDS = ["lives", "in", "Berlin", "Lisbon", "loves", "coffee", "tea", "not", "cat", "named", "Miso", "works", "as"]


@settings(max_examples=60, deadline=None)
@given(old=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
       new=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
def test_topic_overlap_is_symmetric_and_a_share(old, new):
    a, b = "The user " + " ".join(old) + ".", "The user " + " ".join(new) + "."
    assert corrections.topic_overlap(a, b) == corrections.topic_overlap(b, a)
    assert 0.0 <= corrections.topic_overlap(a, b) <= 1.0
    assert decide(a, b)[0] in ("merge", "keep_new", "keep_old", "keep_both")


def test_merge_on_promote_keeps_the_text_it_rewrites(driver_factory):
    """Same subject: merge-on-promote rewrites the entry itself; what it said before stays in its history."""
    d = driver_factory()
    promote(d, "I live in Lisbon now.", "The user lives in Lisbon.", old="The user lives in Berlin.", subject="home")
    (persona,) = d.personas()
    assert persona.id == "p-old" and persona.text == "The user lives in Lisbon." and d.requests_of("correction") == []
    assert [(v.text, v.reason) for v in persona.version_history] == [("The user lives in Berlin.", "promotion_merge")]


def test_a_synthesised_new_value_is_decided_against_the_entry_at_once(driver_factory):
    """Synthesis on a persona entry's topic: queued before it becomes a second entry; keep_new creates the
    reflection, archives the entry and opens the reflection's history with it."""
    d = driver_factory()
    old = held_persona(d, "The user loves living in Berlin.")
    d.turn("I live in Lisbon now.", T0)
    d.flush()
    (req,) = d.requests_of("correction")
    assert req.payload["corrections"][0]["new_text"] == "The user lives in Lisbon."
    rid = reflection_id(SCOPE, "The user lives in Lisbon.")
    lisbon = d.state.entries[rid]
    assert lisbon.status == "pending" and old.id not in d.state.entries
    assert [(v.text, v.reason) for v in lisbon.version_history] == [(old.text, "correction_keep_new")]
    assert [a["reason"] for a in d.archives()] == [f"correction_keep_new:{rid}"]
    d.feedback(rid, "confirm", T0 + MIN)
    d.feedback(rid, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (persona,) = d.personas()  # promoted: the persona entry keeps what its reflection replaced
    assert persona.text == lisbon.text and persona.version_history == lisbon.version_history


@pytest.mark.parametrize("action", ["merge", "keep_old", "keep_both"])
def test_a_synthesised_statement_merged_dropped_or_kept(driver_factory, action):
    d = driver_factory(auto=False)
    old = held_persona(d, "The user loves coffee.")
    d.turn("I love green tea.", T0)
    d.flush()
    while not any(r.task == "correction" for r in d.outbox):
        d.pump_one()  # Stage-1, Stage-2, synthesis: queued
    (req,) = [r for r in d.outbox if r.task == "correction"]
    d.outbox.remove(req)
    answer(d, req, action, "The user loves coffee and green tea." if action == "merge" else "")
    tea = reflection_id(SCOPE, "The user loves green tea.")
    if action == "merge":  # the entry rewritten in place, the draft's facts joined, no second entry
        entry = d.state.entries[old.id]
        assert entry.text == "The user loves coffee and green tea." and tea not in d.state.entries
        assert [v.text for v in entry.version_history] == [old.text] and entry.evidence == old.evidence
        assert len(entry.source_fact_ids) == 1
    else:
        assert d.state.entries[old.id] == old and (tea in d.state.entries) == (action == "keep_both")
    assert d.state.corrections == [] and d.archives() == []


def test_a_synthesised_statement_contradicting_a_live_reflection_replaces_it(driver_factory):
    """A model's draft the other way round from an open reflection (Stage-2 did not take it as its negation)."""
    from credence.tables.entries import new_reflection

    d = driver_factory(auto=False)
    old = new_reflection("r-coffee", Scope.parse(SCOPE), "The user loves coffee.", T0, subject="coffee")
    d.state.entries[old.id] = old
    d.turn("Coffee? Not for me these days.", T0 + MIN)
    d.flush()
    stage1 = d.outbox.pop(0)
    fact = {"id": "f1", "text": "The user does not drink coffee.", "subject": "coffee", "importance": 6,
            "polarity": "negative", "source_turn_ids": [stage1.payload["turns"][0]["id"]], "origin": "user"}
    d.result(stage1, {"facts": [fact]})
    d.result(d.outbox.pop(0), {"classifications": []})  # Stage-2: no relation found
    synthesis = d.outbox.pop(0)
    d.result(synthesis, {"drafts": [{"text": "The user does not drink coffee.", "subject": "drinks",
                                     "source_fact_ids": ["f1"]}]})
    (req,) = [r for r in d.outbox if r.task == "correction"]
    assert req.payload["corrections"][0]["old"]["id"] == old.id
    d.pump()  # the rules: the other polarity on the same thing replaces it
    assert old.id not in d.state.entries and [a["entry_id"] for a in d.archives()] == [old.id]
    (new,) = d.reflections()
    assert new.text == "The user does not drink coffee." and new.version_history[0].text == old.text


def test_a_reflection_of_the_same_polarity_is_not_a_target(driver_factory):
    d = driver_factory()
    d.turn("I love coffee.", T0)
    d.flush()
    d.turn("I love green tea.", T0 + timedelta(days=1))
    d.flush()
    assert d.requests_of("correction") == [] and len(d.reflections()) == 2
