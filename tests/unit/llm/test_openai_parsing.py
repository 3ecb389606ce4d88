import pytest

from credence.streams.llm.models import Observation, Turn
from credence.streams.llm.openai_parsing import (
    InvalidOutput,
    parse_classifications,
    parse_facts,
    parse_feedback,
    parse_merge,
)
from credence.streams.llm.prompts import merge_decision, stage1_extraction, stage2_classification, surfaced_feedback

TURNS = [Turn(id="u1", role="user", text="I love coffee", ts="x"), Turn(id="a1", role="ai", text="You love tea", ts="x")]
OBS = [Observation(id="o1", text="The user likes coffee.", subject="coffee")]


def _extracted(*turn_ids: str) -> stage1_extraction.ExtractedFact:
    return stage1_extraction.ExtractedFact(text="The user loves coffee.", subject="Coffee", importance=8,
                                           polarity="positive", source_turn_ids=list(turn_ids))


def test_origin_comes_from_the_cited_turns_not_the_model():
    out = stage1_extraction.Output(facts=[_extracted("u1"), _extracted("a1"), _extracted("a1", "u1")])
    assert [(f.origin, f.subject) for f in parse_facts(out, TURNS)] == [
        ("user", "coffee"), ("ai", "coffee"), ("user", "coffee"),
    ]


def test_same_fact_twice_is_one_fact_with_a_stable_id():
    out = stage1_extraction.Output(facts=[_extracted("u1"), _extracted("u1")])
    [fact] = parse_facts(out, TURNS)
    assert parse_facts(out, TURNS)[0].id == fact.id


@pytest.mark.parametrize("turn_ids", [[], ["ghost"]])
def test_facts_must_cite_known_turns(turn_ids):
    with pytest.raises(InvalidOutput):
        parse_facts(stage1_extraction.Output(facts=[_extracted(*turn_ids)]), TURNS)


def test_duplicate_pairs_collapse_and_unknown_ids_are_refused():
    payload = stage2_classification.Input(
        facts=[stage2_classification.FactRef(id="f1", text="t", subject="coffee", polarity="positive")],
        observations=OBS,
    )
    pair = stage2_classification.Pair(fact_id="f1", observation_id="o1", relation="reinforce")
    assert len(parse_classifications(stage2_classification.Output(classifications=[pair, pair]), payload)) == 1
    ghost = pair.model_copy(update={"observation_id": "o9"})
    with pytest.raises(InvalidOutput, match="o9"):
        parse_classifications(stage2_classification.Output(classifications=[ghost]), payload)


def test_a_surfaced_reflection_left_out_is_ignored():
    surfaced = [*OBS, Observation(id="o2", text="The user has a dog.", subject="dog")]
    out = surfaced_feedback.Output(decisions=[surfaced_feedback.Decision(id="o2", decision="deny")])
    assert [(d.id, d.decision) for d in parse_feedback(out, surfaced)] == [("o1", "ignore"), ("o2", "deny")]


def test_merge_needs_a_known_target_and_create_drops_one():
    with pytest.raises(InvalidOutput):
        parse_merge(merge_decision.Output(action="merge", target_id=None, text="x"), OBS)
    with pytest.raises(InvalidOutput):
        parse_merge(merge_decision.Output(action="merge", target_id="o9", text="x"), OBS)
    created = parse_merge(merge_decision.Output(action="create", target_id="o1", text=" new "), OBS)
    assert (created.action, created.target_id, created.text) == ("create", None, "new")
