import hashlib

import pytest

from credence.streams.llm.models import Fact, Observation, ReflectionDraft, Turn
from credence.streams.llm.openai_backend import response_format
from credence.streams.llm.prompts import (
    TASKS,
    candidate_rerank,
    merge_decision,
    negative_keyword_target,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.prompts.base import INPUT_MARKER

# Editing a system prefix changes what the model is asked: bump VERSION and update the fingerprint.
FINGERPRINTS = {
    ("stage1_extraction", 1): "680673d2a01fbfad",
    ("stage2_classification", 1): "e9c38a1a105c872d",
    ("candidate_rerank", 1): "bc12ee691b1f93af",
    ("surfaced_feedback", 1): "ee454d92c85e81c9",
    ("negative_keyword_target", 1): "d4c49024d69fbec2",
    ("reflection_synthesis", 1): "4bf4973b5299ded6",
    ("merge_decision", 1): "e3b5f41f86e94da8",
}


def _fingerprint(system: str) -> str:
    return hashlib.sha256(system.encode("utf-8")).hexdigest()[:16]


def _fact(i: int) -> Fact:
    return Fact(id=f"f{i}", text=f"The user likes thing {i}.", subject=f"thing {i}", importance=6,
                polarity="positive", source_turn_ids=[f"t{i}"])


def _obs(i: int) -> Observation:
    return Observation(id=f"o{i}", text=f"The user likes thing {i}.", subject=f"thing {i}")


def _inputs(i: int) -> dict:
    """Two different inputs per task (i = 1, 2), to show the prefix does not follow the input."""
    return {
        "stage1_extraction": stage1_extraction.Input(turns=[Turn(id=f"t{i}", role="user", text=f"I like {i}", ts="x")]),
        "stage2_classification": stage2_classification.Input(
            facts=stage2_classification.fact_refs([_fact(i)]), observations=[_obs(i)]),
        "candidate_rerank": candidate_rerank.Input(
            facts=stage2_classification.fact_refs([_fact(i)]), observations=[_obs(i)], limit=i),
        "surfaced_feedback": surfaced_feedback.Input(reply_text=f"yes {i}", surfaced=[_obs(i)]),
        "negative_keyword_target": negative_keyword_target.Input(last_user_messages=[f"no {i}"], observations=[_obs(i)]),
        "reflection_synthesis": reflection_synthesis.Input(facts=[_fact(i)]),
        "merge_decision": merge_decision.Input(
            reflection=ReflectionDraft(text=f"r{i}", subject="s", source_fact_ids=[f"f{i}"]), persona_entries=[_obs(i)]),
    }


def test_one_module_per_task():
    assert sorted(TASKS) == sorted(name for name, _ in FINGERPRINTS)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_module_shape(name):
    module = TASKS[name]
    assert isinstance(module.VERSION, int) and module.VERSION >= 1
    assert isinstance(module.MAX_TOKENS, int) and 0 < module.MAX_TOKENS <= 4096
    assert isinstance(module.SYSTEM, str) and "JSON" in module.SYSTEM


@pytest.mark.parametrize("name", sorted(TASKS))
def test_system_prefix_is_pinned_to_its_version(name):
    module = TASKS[name]
    assert _fingerprint(module.SYSTEM) == FINGERPRINTS[(module.NAME, module.VERSION)], (
        f"{name} SYSTEM changed: bump VERSION and record the new fingerprint"
    )


@pytest.mark.parametrize("name", sorted(TASKS))
def test_variable_data_goes_only_in_the_user_message(name):
    module = TASKS[name]
    first, second = _inputs(1)[name], _inputs(2)[name]
    system_before = module.SYSTEM
    rendered = [module.render_user(first), module.render_user(second)]
    assert module.SYSTEM == system_before
    assert rendered[0] != rendered[1]
    assert all(r.startswith(INPUT_MARKER) for r in rendered)
    assert module.Input.model_validate_json(rendered[0][len(INPUT_MARKER):]) == first
    assert module.render_user(first) == rendered[0]  # deterministic rendering


def _objects(schema: dict):
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield schema
        for value in schema.values():
            yield from _objects(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _objects(item)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_schema_sent_is_the_output_models_strict_schema(name):
    module = TASKS[name]
    fmt = response_format(module)
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == f"{module.NAME}_v{module.VERSION}"
    schema = fmt["json_schema"]["schema"]
    assert schema == module.Output.model_json_schema()
    for obj in _objects(schema):  # strict mode: closed objects, every property required
        assert obj.get("additionalProperties") is False
        assert sorted(obj.get("required", [])) == sorted(obj.get("properties", {}))
