"""What a scope's requests carry stays bounded however large the scope grows: a promotion carries the K
persona entries most relevant to its reflection, a scope holds at most so many promotions in flight (the
others wait their turn, asked in the order a pass over every entry would ask them), and a Stage-2 request
carries no candidate that could not fit its prompt."""

from __future__ import annotations

from datetime import timedelta

from credence.config.pipeline import PipelineSettings
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import promotion_payload, stage2_payload
from credence.tables.entries import new_persona_entry
from credence.tables.lifecycle import PromotionTicket
from credence.tables.scope import Scope
from credence.tables.tokens import approximate_tokens
from tests.support.promoting import promoting_scope

from .conftest import SCOPE_KEY, T0

TICKET = PromotionTicket("r-00000", 1, 1)


def context(pipeline: PipelineSettings, memory) -> StepContext:
    return StepContext(now=T0, powerful=True, boot="boot-1", memory=memory, pipeline=pipeline)


def test_a_promotion_carries_the_k_most_relevant_persona_entries(memory_factory):
    state = promoting_scope(SCOPE_KEY, reflections=1, personas=200, at=T0)
    parts = Scope.parse(SCOPE_KEY)
    for pid, text in [("p-sail-1", "The user owns two sailing boats"), ("p-sail-2", "The user went sailing in Greece")]:
        state.entries[pid] = new_persona_entry(pid, parts, text, T0, subject="sailing")
    reflection = state.entries["r-00000"]  # "The user practises sailing with club number 0"
    payload = promotion_payload(state, reflection, context(PipelineSettings(promotion_max_personas=2),
                                                           memory_factory()), TICKET)
    assert sorted(p["id"] for p in payload["personas"]) == ["p-sail-1", "p-sail-2"]
    default = promotion_payload(state, reflection, context(PipelineSettings(), memory_factory()), TICKET)
    assert len(default["personas"]) == PipelineSettings().promotion_max_personas == 20


def test_a_stage2_request_carries_only_candidates_that_can_fit_its_prompt(memory_factory):
    state = promoting_scope(SCOPE_KEY, reflections=5000, personas=0, at=T0)
    memory = memory_factory(stage2_max_prompt_tokens=2000)
    fact = {"id": "f1", "text": "I go sailing every weekend", "subject": "sailing", "importance": 8}
    payload = stage2_payload(state, context(PipelineSettings(), memory), [fact])
    kept = payload["observations"]
    # each candidate costs at least its text's tokens (up to the observation cap) and one for its id
    assert sum(approximate_tokens(o["text"]) + 1 for o in kept) <= 2000 < 5000
    assert 100 < len(kept) < 200
    assert all("sailing" in o["text"] for o in payload["observations"])  # the pre-ranked best survive


def in_flight(d) -> list[str]:
    return sorted(r.payload["entry_id"] for r in d.state.pending_tasks("promotion"))


def test_promotions_in_flight_stay_within_the_cap_and_every_one_is_decided(driver_factory):
    cap = 8
    d = driver_factory(state=promoting_scope(SCOPE_KEY, reflections=300, personas=30, at=T0),
                       pipeline=PipelineSettings(promotion_max_in_flight=cap, promotion_max_personas=5),
                       auto=False)
    d.tick(T0 + timedelta(minutes=1))
    assert in_flight(d) == [f"r-{i:05d}" for i in range(cap)]  # the first by id, as a pass over every entry
    while d.state.pending_tasks("promotion"):
        assert len(d.state.pending_tasks("promotion")) <= cap
        d.pump_one()
    assert all(len(r.payload["personas"]) <= 5 for r in d.requests_of("promotion"))
    asked = {r.payload["entry_id"] for r in d.requests_of("promotion")}
    assert asked == {e for e in d.state.entries if e.startswith("r-")} | {
        j["entry_id"] for j in d.journal() if j["entry_id"].startswith("r-")}
    assert len(asked) == 300
    assert not any(e.kind == "reflection" and e.status == "confirmed" for e in d.state.entries.values())


def test_waiting_promotions_are_asked_in_the_order_of_a_fresh_pass(driver_factory):
    """Marks are scratch: a scope read back from its tables (no marks) asks the same next reflections."""
    from .conftest import run_request

    pipeline = PipelineSettings(promotion_max_in_flight=4)
    d = driver_factory(state=promoting_scope(SCOPE_KEY, reflections=40, personas=3, at=T0), pipeline=pipeline,
                       auto=False)
    d.tick(T0 + timedelta(minutes=1))
    for _ in range(6):
        d.pump_one()
    fresh = driver_factory(state=type(d.state).from_dict(d.state.to_dict()), pipeline=pipeline, auto=False)
    for _ in range(3):
        req = min(d.state.pending_tasks("promotion"), key=lambda r: r.id)
        output = run_request(req)
        d.result(req, output)
        fresh.result(fresh.state.requests[req.id], output)
        assert in_flight(fresh) == in_flight(d) and len(in_flight(d)) == 4
    assert fresh.state.to_dict() == d.state.to_dict()
