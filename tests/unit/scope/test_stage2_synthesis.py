"""Stage-2 batching and the synthesis of new reflections: AI facts stay out, ids are deterministic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from credence.streams.scope.requests import reflection_id

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")


def fact(fid: str, importance: int = 6, origin: str = "user", subject: str | None = None) -> dict:
    subject = subject or f"topic {fid}"
    return {"id": fid, "text": f"The user likes {subject}.", "subject": subject, "importance": importance,
            "polarity": "positive", "source_turn_ids": ["t1"], "origin": origin}


def answer_stage1(d, facts: list[dict]) -> None:
    d.turn("I love hiking", T0)
    d.flush()
    req = d.outbox.pop(0)
    assert req.task == "stage1"
    d.result(req, {"facts": facts})


def test_ai_origin_facts_never_enter_stage2_nor_synthesis(driver_factory):
    d = driver_factory(auto=False)
    answer_stage1(d, [fact("f-ai", 9, origin="ai"), fact("f-user", 6)])
    # an AI fact has no work at all: it is only remembered (by id), never queued for Stage-2 or synthesis
    assert "f-ai" not in d.state.facts and d.state.knows_fact("f-ai")
    d.pump()
    for req in d.issued:
        if req.task in ("stage2", "synthesis"):
            assert [f["id"] for f in req.payload["facts"]] == ["f-user"]
    assert len(d.requests_of("synthesis")) == 1


def test_ai_origin_facts_are_not_synthesized_with_powerful_memory_off(driver_factory):
    d = driver_factory(auto=False, powerful=False)
    answer_stage1(d, [fact("f-ai", 9, origin="ai"), fact("f-user", 6)])
    d.pump()
    assert d.requests_of("stage2") == []
    assert [[f["id"] for f in r.payload["facts"]] for r in d.requests_of("synthesis")] == [["f-user"]]


def test_stage2_batches_at_most_20_facts_by_importance_then_age(driver_factory):
    d = driver_factory(auto=False).with_candidate()
    importances = [5, 9, 5, 7, 9, 3, 10, 5, 6, 6, 8, 1, 2, 9, 4, 4, 7, 5, 6, 10, 3, 8, 2, 1, 9]
    facts = [fact(f"f{i:02d}", imp) for i, imp in enumerate(importances)]
    answer_stage1(d, facts)
    first = d.outbox.pop(0)
    assert first.task == "stage2"
    expected = sorted(range(len(facts)), key=lambda i: (-importances[i], i))
    assert [f["id"] for f in first.payload["facts"]] == [f"f{i:02d}" for i in expected[:20]]
    d.result(first, {"classifications": []})
    second = d.outbox.pop(0)
    assert second.task == "stage2"
    assert [f["id"] for f in second.payload["facts"]] == [f"f{i:02d}" for i in expected[20:]]
    assert d.requests_of("synthesis") == []  # synthesis waits for every fact's Stage-2


def test_matched_facts_are_evidence_and_unmatched_ones_are_synthesized(driver_factory):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    assert HIKING in d.state.entries
    d.turn("I really love hiking and I like tea", T0 + timedelta(minutes=1))
    d.flush()
    stage2 = d.requests_of("stage2")[-1]
    assert {f["text"] for f in stage2.payload["facts"]} == {"The user loves hiking.", "The user likes tea."}
    synth = d.requests_of("synthesis")[-1]
    assert [f["text"] for f in synth.payload["facts"]] == ["The user likes tea."]
    assert reflection_id(SCOPE, "The user likes tea.") in d.state.entries
    hiking = d.state.entries[HIKING]
    assert hiking.evidence.user_fact_reinforce_count == 1
    assert all(f["synthesis"] == "done" and f["stage2"] == "done" for f in d.state.facts.values())


def test_reflection_ids_are_deterministic_and_never_duplicated(driver_factory):
    d = driver_factory(powerful=False)
    d.turn("I love hiking", T0)
    d.flush()
    d.turn("I love hiking!", T0 + timedelta(minutes=1))
    d.flush()
    assert len(d.requests_of("synthesis")) == 2
    assert [e.id for e in d.reflections()] == [HIKING]
    created = [j for j in d.journal() if j["event"] == "created"]
    assert [j["event_id"] for j in created] == [f"{HIKING}@1"]
    assert reflection_id(SCOPE, "  the USER loves   hiking. ") == HIKING  # case and spacing do not matter
    assert reflection_id("acme/u2/aria", "The user loves hiking.") != HIKING  # scopes never share ids


@pytest.mark.parametrize("text, seed", [("I love hiking", 0.4), ("I really love hiking", 0.6),
                                         ("My name is Sam", 0.6), ("I have a dog", 0.2), ("I like tea", 0.0),
                                         ("Remember this: I love hiking", 0.8)])
def test_new_reflection_is_seeded_by_its_source_importance(driver_factory, text, seed):
    d = driver_factory()
    d.turn(text, T0)
    d.flush()
    (reflection,) = d.reflections()
    assert reflection.evidence.reinforcement == seed
    assert reflection.status == "pending"
    created = [j for j in d.journal() if j["event"] == "created"]
    assert created[0]["entry"]["evidence"]["reinforcement"] == seed and created[0]["to_status"] == "pending"


def test_seed_uses_the_highest_source_importance(driver_factory, pipeline_factory):
    # Off, each user turn is extracted on its own: the two facts meet in one synthesis call.
    d = driver_factory(powerful=False, pipeline=pipeline_factory(synthesis_min_facts=2))
    d.turn("I like hiking", T0)  # importance 6
    d.turn("I really love hiking", T0 + timedelta(seconds=1))  # importance 9, same subject
    d.flush()
    (reflection,) = d.reflections()
    assert len(reflection.source_fact_ids) == 2
    assert reflection.importance == 9 and reflection.evidence.reinforcement == 0.6


def test_stage2_classification_of_an_observation_not_offered_is_ignored(driver_factory):
    d = driver_factory().with_candidate()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "deny", T0 + timedelta(minutes=1))  # denied: no longer a Stage-2 candidate
    denied = d.state.entries[HIKING]
    d.auto = False
    d.turn("I really love hiking", T0 + timedelta(minutes=2))
    d.flush()
    d.pump_one()  # stage1
    (req,) = d.outbox
    d.outbox.clear()
    assert req.task == "stage2" and HIKING not in [o["id"] for o in req.payload["observations"]]
    (f,) = req.payload["facts"]
    d.result(req, {"classifications": [{"fact_id": f["id"], "observation_id": HIKING, "relation": "reinforce"}]})
    assert d.state.entries[HIKING] == denied
    assert d.state.facts[f["id"]]["synthesis"] == "pending"  # not evidence: it may become an observation


def test_fact_origin_comes_from_the_cited_turns(driver_factory):
    d = driver_factory(auto=False)
    d.turn("Do you like hiking?", T0, role="ai")
    d.turn("Yes!", T0 + timedelta(seconds=1))
    d.turn("You must also love rowing.", T0 + timedelta(seconds=2), role="ai")
    d.turn("haha, I love tea", T0 + timedelta(seconds=3))
    d.flush()
    (req,) = d.outbox
    d.outbox.clear()
    hiking = {**fact("f-hiking", 6, subject="hiking"), "source_turn_ids": ["t1", "t2"]}
    rowing = {**fact("f-rowing", 6, subject="rowing"), "source_turn_ids": ["t3", "t4"]}  # backend said "user"
    tea = {**fact("f-tea", 6, subject="tea"), "source_turn_ids": ["t4"]}
    d.result(req, {"facts": [hiking, rowing, tea]})
    # the answered question is the user's; the AI's statement is not, though a user turn is cited too
    assert sorted(d.state.facts) == ["f-hiking", "f-tea"] and d.state.knows_fact("f-rowing")
    (stage2,) = d.outbox
    assert [f["id"] for f in stage2.payload["facts"]] == ["f-hiking", "f-tea"]


def test_no_stage2_call_when_no_candidate_exists_and_the_facts_go_on_to_synthesis(driver_factory):
    """Nothing to compare: any Stage-2 answer over an empty pool is ignored (it can name no offered
    observation), so the step decides what that answer would and asks nothing."""
    d = driver_factory(auto=False)
    d.turn("I love hiking and I like tea", T0)
    d.flush()
    d.pump_one()  # stage1
    assert [r.task for r in d.outbox] == ["synthesis"] and d.requests_of("stage2") == []
    facts = list(d.state.facts.values())
    assert len(facts) == 2 and all(f["stage2"] == "done" and f["synthesis"] == "pending" for f in facts)
    (synthesis,) = d.outbox
    assert sorted(f["id"] for f in synthesis.payload["facts"]) == sorted(d.state.facts)
    d.pump()
    assert HIKING in d.state.entries


def test_every_fact_becomes_a_reflection_however_many_one_window_brings(driver_factory):
    # An answer holds at most MAX_REFLECTIONS drafts (a wire bound), so a synthesis request carries at most
    # that many facts and the rest go in the next one: none is marked done without a chance to be drafted.
    from credence.streams.llm.prompts.reflection_synthesis import MAX_REFLECTIONS
    from credence.streams.scope.requests import SYNTHESIS_MAX_FACTS

    assert SYNTHESIS_MAX_FACTS <= MAX_REFLECTIONS
    d = driver_factory(auto=False, powerful=False)
    subjects = ["tea", "coffee", "jazz", "chess", "sushi", "hiking", "cycling", "painting", "poetry", "baking",
                "opera", "karate", "skiing", "gardening", "knitting", "surfing", "origami", "pottery"]
    answer_stage1(d, [fact(f"f{i:02d}", 6, subject=s) for i, s in enumerate(subjects)])
    d.pump()
    carried = [len(r.payload["facts"]) for r in d.requests_of("synthesis")]
    assert carried == [10, 8]
    texts = {e.text for e in d.state.entries.values() if e.kind == "reflection"}
    assert texts == {f"The user likes {s}." for s in subjects}
