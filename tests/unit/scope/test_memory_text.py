"""Memories a person would keep: every Stage-1 fact and every reflection passes the shared
self-containment gate, whichever backend wrote it; synthesis never restates what the scope holds; a
promotion that restates an active persona entry merges into it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from credence.streams.scope.requests import reflection_id
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
MIN = timedelta(minutes=1)


def fact(fid: str, text: str, subject: str) -> dict:
    return {"id": fid, "text": text, "subject": subject, "importance": 6, "polarity": "positive",
            "source_turn_ids": ["t1"], "origin": "user"}


def stage1(d, facts: list[dict]):
    d.turn("I love my dogs and they love me", T0)
    d.flush()
    req = d.outbox.pop(0)
    assert req.task == "stage1"
    return d.result(req, {"facts": facts})


def test_a_model_fact_that_is_not_self_contained_never_becomes_a_fact(driver_factory):
    d = driver_factory(auto=False)
    ctx = stage1(d, [fact("f1", "The user loves them and how much joy they bring me.", "them"),
                     fact("f2", "The user loves your commitment.", "commitment"),
                     fact("f3", "The user loves trying out new recipes and experimenting in the.", "recipes"),
                     fact("f4", "The user has two dogs.", "dog")])
    assert list(d.state.facts) == ["f4"]
    assert ctx.refused == {"stage1:first_person": 1, "stage1:about_character": 1, "stage1:cut_off": 1}
    assert any("refused (first_person)" in line for line in ctx.log)


def test_a_model_fact_from_real_speech_is_refused_and_counted_by_its_reason(driver_factory):
    d = driver_factory(auto=False)
    ctx = stage1(d, [fact("f1", "The user loves going to this park near their house.", "park"),
                     fact("f2", "The user enjoys what they do.", "work"),
                     fact("f3", "The user loves being in places like this - it brings.", "places"),
                     fact("f4", "The user loves Griffith Park near their house.", "griffith park")])
    assert list(d.state.facts) == ["f4"]
    assert ctx.refused == {"stage1:dangling_reference": 1, "stage1:empty_complement": 1, "stage1:cut_off": 1}


def _synthesis_request(d, facts):
    stage1(d, facts)
    d.pump_one()  # stage2
    req = d.outbox.pop(0)
    assert req.task == "synthesis"
    return req


def test_a_model_reflection_that_is_not_self_contained_is_never_created(driver_factory):
    d = driver_factory(auto=False).with_candidate()
    req = _synthesis_request(d, [fact("f1", "The user has two dogs.", "dog")])
    ctx = d.result(req, {"drafts": [
        {"text": "The user loves them.", "subject": "dog", "source_fact_ids": ["f1"]},
        {"text": "The user has two dogs.", "subject": "dog", "source_fact_ids": ["f1"]}]})
    assert [e.text for e in d.reflections()] == ["The user has two dogs."]
    assert ctx.refused == {"synthesis:dangling_reference": 1}


def test_synthesis_declines_to_restate_an_observation_the_scope_holds(driver_factory):
    d = driver_factory(auto=False)
    held = new_persona_entry("p-fr", Scope("acme", "u1", "aria"), "The user is learning French with a tutor.",
                             T0, subject="french")
    d.state.entries[held.id] = held
    req = _synthesis_request(d, [fact("f1", "The user is learning French.", "french"),
                                 fact("f2", "The user loves jazz.", "jazz")])
    ctx = d.result(req, {"drafts": [
        {"text": "The user is learning French.", "subject": "french", "source_fact_ids": ["f1", "f2"]},
        {"text": "The user loves jazz.", "subject": "jazz", "source_fact_ids": ["f2"]},
        {"text": "The user enjoys jazz.", "subject": "jazz music", "source_fact_ids": ["f2"]}]})
    assert [e.text for e in d.reflections()] == ["The user loves jazz."]
    assert ctx.refused == {"synthesis:restatement": 2}


def test_different_statements_on_shared_words_are_not_restatements(driver_factory):
    d = driver_factory(auto=False)
    held = new_persona_entry("p-home", Scope("acme", "u1", "aria"), "The user lives in Montreal.", T0,
                             subject="home")
    d.state.entries[held.id] = held
    req = _synthesis_request(d, [fact("f1", "The user likes Montreal.", "montreal"),
                                 fact("f2", "The user does not like cycling.", "cycling")])
    d.state.entries["r-cyc"] = new_reflection("r-cyc", Scope("acme", "u1", "aria"), "The user likes cycling.", T0,
                                              subject="cycling")
    d.result(req, {"drafts": [
        {"text": "The user likes Montreal.", "subject": "montreal", "source_fact_ids": ["f1"]},
        {"text": "The user does not like cycling.", "subject": "cycling", "source_fact_ids": ["f2"]}]})
    d.pump()  # "likes Montreal" is on the topic of "lives in Montreal": the correction task keeps both
    assert {e.text for e in d.reflections()} >= {"The user likes Montreal.", "The user does not like cycling."}


def _confirmed(d, text: str, at):
    d.turn(text.replace("The user is", "I am").rstrip("."), at)
    d.flush()
    rid = reflection_id(SCOPE, text)
    d.feedback(rid, "confirm", at + MIN, feedback_id=f"c1-{rid}")
    return rid


def test_a_promotion_that_restates_an_active_persona_entry_merges_into_it(driver_factory):
    d = driver_factory(auto=False)
    twin = new_persona_entry("p-fr", Scope("acme", "u1", "aria"), "The user is learning French.", T0,
                             subject="french")
    d.state.entries[twin.id] = twin
    reflection = new_reflection("r-fr", Scope("acme", "u1", "aria"), "The user is learning French with a tutor.",
                                T0, subject="french with a tutor")
    d.state.entries[reflection.id] = reflection
    d.auto = True
    d.feedback("r-fr", "confirm", T0 + MIN, feedback_id="c1")
    d.auto = False
    d.feedback("r-fr", "confirm", T0 + 2 * MIN, feedback_id="c2")
    (req,) = d.requests_of("promotion")
    ctx = d.result(req, {"decision": {"action": "create", "target_id": None,
                                      "text": "The user is learning French with a tutor."}})
    assert [p.id for p in d.personas()] == ["p-fr"]
    merged = d.state.entries["p-fr"]
    assert merged.text == "The user is learning French with a tutor." and merged.merged_from_ids == ("r-fr",)
    assert d.state.entries["r-fr"].status == "promoted" and d.state.entries["r-fr"].merged_into_id == "p-fr"
    assert any("restates p-fr" in line for line in ctx.log)


def test_the_shipped_demos_french_twins_end_as_one_persona_entry(driver_factory):
    """Two confirmations each for "learning French with a tutor" and, later, "learning French": the
    second reflection is never synthesised beside the first, so one persona entry results."""
    d = driver_factory()
    first = _confirmed(d, "The user is learning French with a tutor.", T0)
    d.feedback(first, "confirm", T0 + 2 * MIN, feedback_id="c2")
    d.turn("I am learning French", T0 + 10 * MIN)
    d.flush()
    assert [p.text for p in d.personas()] == ["The user is learning French with a tutor."]
    assert reflection_id(SCOPE, "The user is learning French.") not in d.state.entries


def test_a_richer_restatement_of_an_open_reflection_gives_it_the_richer_text(driver_factory):
    d = driver_factory(auto=False)
    held = new_reflection("r-fr", Scope("acme", "u1", "aria"), "The user is learning French.", T0, subject="french")
    d.state.entries[held.id] = held
    req = _synthesis_request(d, [fact("f1", "The user is learning French with a tutor.", "french tutor")])
    d.result(req, {"drafts": [{"text": "The user is learning French with a tutor.", "subject": "french",
                               "source_fact_ids": ["f1"]}]})
    (only,) = d.reflections()
    assert only.id == "r-fr" and only.text == "The user is learning French with a tutor."
    assert "f1" in only.source_fact_ids
    assert [j["event"] for j in d.journal() if j["entry_id"] == "r-fr"][-2:] == ["invalidated", "merged"]


def test_with_embeddings_a_draft_close_to_a_related_observation_is_declined(driver_factory):
    """The runner marks a draft whose cosine similarity to a related observation reaches the threshold;
    the scope step declines it like a lexical restatement (here "adores" and "is crazy about" share no
    content word)."""
    import asyncio

    from credence.streams.llm.runner import execute
    from tests.unit.scope.conftest import _BACKEND

    d = driver_factory(auto=False)
    held = new_persona_entry("p-k", Scope("acme", "u1", "aria"), "The user adores kittens.", T0, subject="kittens")
    d.state.entries[held.id] = held
    req = _synthesis_request(d, [fact("f1", "The user is crazy about cats.", "cats")])
    assert req.payload["restatement_cosine"] == 0.9
    assert [o["id"] for o in req.payload["related"]] == ["p-k"]

    def encode(texts):  # "cats" and "kittens" point the same way; anything else elsewhere
        return [[1.0, 0.0] if ("cat" in t or "kitten" in t) else [0.0, 1.0] for t in texts]

    output = asyncio.new_event_loop().run_until_complete(execute(_BACKEND, req.task, req.payload, encode))
    assert output["drafts"][0]["similar_to"] == "p-k"
    ctx = d.result(req, output)
    assert d.reflections() == [] and ctx.refused == {"synthesis:restatement": 1}


def test_a_merge_text_that_is_not_self_contained_is_not_written(driver_factory):
    d = driver_factory(auto=False)
    reflection = new_reflection("r-h", Scope("acme", "u1", "aria"), "The user loves hiking.", T0, subject="hiking")
    d.state.entries[reflection.id] = reflection
    d.auto = True
    d.feedback("r-h", "confirm", T0 + MIN, feedback_id="c1")
    d.auto = False
    d.feedback("r-h", "confirm", T0 + 2 * MIN, feedback_id="c2")
    (req,) = d.requests_of("promotion")
    ctx = d.result(req, {"decision": {"action": "create", "target_id": None, "text": "The user loves it with you."}})
    assert [p.text for p in d.personas()] == ["The user loves hiking."]
    assert ctx.refused == {"promotion:about_character": 1}
