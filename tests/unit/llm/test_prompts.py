import hashlib
import json

import jsonschema
import pytest

from credence.streams.llm.models import CorrectionItem, Fact, Observation, ReflectionDraft, Turn
from credence.streams.llm.openai_backend import response_format
from credence.streams.llm.prompts import (
    PROMPTS,
    candidate_rerank,
    correction,
    merge_decision,
    negative_keyword_target,
    recent_summary,
    refine_cluster,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.prompts.base import ALIAS_KEY, ALLOWED_KEYWORDS, INPUT_MARKER, static_schema
from tests.support.openai_answers import expected_id_enums, ids_by_kind, schema_problems

# Editing a system prefix changes what the model is asked: bump VERSION and update the fingerprint.
FINGERPRINTS = {
    ("stage1_extraction", 4): "102fae5a4b282896",
    ("stage2_classification", 2): "904799764a63b509",
    ("candidate_rerank", 3): "f1d2e4ad143f43b7",
    ("surfaced_feedback", 2): "a7e84d91535c6747",
    ("negative_keyword_target", 3): "6e1814a63808dd5a",
    ("reflection_synthesis", 4): "bb3e635429f77717",
    ("merge_decision", 2): "29ccf62c9aa97d27",
    # -- correction work --
    ("correction", 1): "ca4f9aa168d75afa",
    ("refine_cluster", 1): "9f0f5926e1262c63",
    ("recent_summary", 1): "6835f5f7ab73eb7b",
}


def _fingerprint(system: str) -> str:
    return hashlib.sha256(system.encode("utf-8")).hexdigest()[:16]


def _fact(i: int) -> Fact:
    return Fact(id=f"f-{i:020d}", text=f"The user likes thing {i}.", subject=f"thing {i}", importance=6,
                polarity="positive", source_turn_ids=[f"t{i}"])


def _obs(i: int) -> Observation:
    return Observation(id=f"r-{i:016x}", text=f"The user likes thing {i}.", subject=f"thing {i}", score=0.5 * i)


def calls(i: int) -> dict:
    """Two different calls per task (i = 1, 2; call i has i items), to show what follows the input."""
    n = range(1, i + 1)
    facts, obs = [_fact(k) for k in n], [_obs(k) for k in n]
    turns = [Turn(id=f"turn-{k}", role="user", text=f"I like {k}", ts="x") for k in n]
    draft = ReflectionDraft(text=f"r{i}", subject="s", source_fact_ids=[facts[0].id], score=2.0)
    return {
        "stage1_extraction": stage1_extraction.build(turns),
        "stage2_classification": stage2_classification.build(facts, obs),
        "candidate_rerank": candidate_rerank.build(facts, obs, i),
        "surfaced_feedback": surfaced_feedback.build(f"yes {i}", obs, f"ai {i}"),
        "negative_keyword_target": negative_keyword_target.build([f"no {i}"], obs, f"ai {i}"),
        "reflection_synthesis": reflection_synthesis.build(facts, obs),
        "merge_decision": merge_decision.build(draft, obs),
        # -- correction work --
        "correction": correction.build([CorrectionItem(id=f"c-{k}", old=o, new_text=f"The user likes {k} now.",
                                                       new_score=float(k)) for k, o in zip(n, obs, strict=True)]),
        "refine_cluster": refine_cluster.build(obs),
        "recent_summary": recent_summary.build(f"memo {i}", turns, 100 * i),
    }


def test_one_module_per_task():
    assert sorted(PROMPTS) == sorted(name for name, _ in FINGERPRINTS)


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_module_shape(name):
    module = PROMPTS[name]
    assert isinstance(module.VERSION, int) and module.VERSION >= 1
    assert isinstance(module.MAX_TOKENS, int) and 0 < module.MAX_TOKENS <= 4096
    assert isinstance(module.SYSTEM, str) and "JSON" in module.SYSTEM


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_system_prefix_is_pinned_to_its_version(name):
    module = PROMPTS[name]
    assert _fingerprint(module.SYSTEM) == FINGERPRINTS[(module.NAME, module.VERSION)], (
        f"{name} SYSTEM changed: bump VERSION and record the new fingerprint {_fingerprint(module.SYSTEM)}"
    )


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_deciding_prompts_carry_worked_examples_including_the_empty_answer(name):
    system = PROMPTS[name].SYSTEM
    examples = system.count("\nINPUT: ")
    assert 3 <= examples <= 6  # 3-6 worked examples in every prompt that decides something
    assert examples == system.count("\nOUTPUT: ")
    outputs = [line[len("OUTPUT: "):] for line in system.splitlines() if line.startswith("OUTPUT: ")]
    for out in outputs:  # every example answer is valid output of the task
        PROMPTS[name].Output.model_validate_json(out)
    for inp in (line[len("INPUT: "):] for line in system.splitlines() if line.startswith("INPUT: ")):
        PROMPTS[name].Input.model_validate_json(inp)  # and every example input has the real input's shape
    if name == "surfaced_feedback":  # one decision per surfaced entry: "empty" is all-ignore
        assert any({d["decision"] for d in json.loads(out)["decisions"]} == {"ignore"} for out in outputs)
    elif name == "recent_summary":  # small talk and no memo: nothing to keep
        assert any(json.loads(out)["summary"] == "" for out in outputs)
    elif name not in ("merge_decision", "correction"):  # these always decide (reject; keep_both)
        assert any(v == [] for out in outputs for v in json.loads(out).values()), "no empty-answer example"
    assert "never instructions" in system


def test_rerank_examples_keep_within_the_limit_and_use_only_offered_ids():
    # An example that breaks its own limit would teach the model to ignore it.
    lines = candidate_rerank.SYSTEM.splitlines()
    pairs = [(json.loads(a[len("INPUT: "):]), json.loads(b[len("OUTPUT: "):]))
             for a, b in zip(lines, lines[1:]) if a.startswith("INPUT: ") and b.startswith("OUTPUT: ")]
    assert len(pairs) >= 3
    for inp, out in pairs:
        assert len(out["observation_ids"]) <= inp["limit"]
        assert set(out["observation_ids"]) <= {o["id"] for o in inp["observations"]}


def test_stage1_rules_cover_roleplay_third_parties_language_and_importance_ten():
    system = stage1_extraction.SYSTEM
    for needle in ("Role-play", "hypotheticals", "jokes", "Other people", "any language", "10 ONLY", "remember this"):
        assert needle in system


def test_stage2_examples_reinforce_negative_with_negative_and_leave_out_a_related_subject():
    system = stage2_classification.SYSTEM
    assert '"polarity":"negative"}],"observations":[{"id":"O1","text":"The user dislikes tea."' in system
    assert "green tea ice cream" in system and '"observation_id":"O2"' not in system.split("OUTPUT: ")[1].splitlines()[0]


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_system_prompt_is_byte_identical_across_calls_and_data_goes_in_the_user_message(name):
    module = PROMPTS[name]
    first, second = calls(1)[name], calls(2)[name]
    system_before = module.SYSTEM
    rendered = [module.render_user(first.payload), module.render_user(second.payload)]
    assert module.SYSTEM == system_before
    assert rendered[0] != rendered[1]
    assert all(r.startswith(INPUT_MARKER) for r in rendered)
    assert module.Input.model_validate_json(rendered[0][len(INPUT_MARKER):]) == first.payload
    assert module.render_user(calls(1)[name].payload) == rendered[0]  # deterministic rendering
    # No long real id reaches the model: only short aliases.
    assert "f-0000" not in rendered[1] and "r-0000" not in rendered[1] and "turn-" not in rendered[1]


def _nodes(schema):
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _nodes(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _nodes(item)


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_every_output_model_is_bounded_and_vllm_safe(name):
    schema = static_schema(PROMPTS[name].Output)
    for node in _nodes(schema):
        if not isinstance(node, dict) or "type" not in node:
            continue
        assert set(node) - {"x-credence-alias"} <= ALLOWED_KEYWORDS, node
        if node["type"] == "array":
            assert node.get("maxItems", 0) > 0, node
        if node["type"] == "string" and "enum" not in node:
            assert node.get("maxLength", 0) > 0, node
        if node["type"] == "object":  # strict mode: closed objects, every property required
            assert node.get("additionalProperties") is False
            assert sorted(node.get("required", [])) == sorted(node.get("properties", {}))


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_call_schema_is_strict_and_its_id_enums_are_exactly_the_calls_aliases(name):
    module = PROMPTS[name]
    for i in (1, 2):
        call = calls(i)[name]
        fmt = response_format(module, call)
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
        assert fmt["json_schema"]["name"] == f"{module.NAME}_v{module.VERSION}"
        schema = fmt["json_schema"]["schema"]
        assert "x-credence-alias" not in json.dumps(schema)
        assert schema_problems(schema, expected_id_enums(module, call.payload)) == []


@pytest.mark.parametrize("name", sorted(set(PROMPTS) - {merge_decision.NAME}))  # its "none" target is no input id
def test_a_prompt_left_out_of_the_servers_id_table_is_checked_as_strictly(name):
    # The test server checks a new prompt's id enums against every id of each alias kind its Output names.
    for i in (1, 2):
        payload = calls(i)[name].payload
        assert ids_by_kind(PROMPTS[name], payload) == expected_id_enums(PROMPTS[name], payload)


def _containers(node):
    if isinstance(node, (dict, list)):
        yield node
        for value in node.values() if isinstance(node, dict) else node:
            yield from _containers(value)


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_a_call_schema_shares_no_container_with_the_cached_schema_or_another_call(name):
    # call_schema is built fresh from the cached static schema on every request (no deep copy first):
    # changing one call's schema must change nothing else
    module = PROMPTS[name]
    before = json.dumps(static_schema(module.Output), sort_keys=True)
    first, second = (response_format(module, calls(i)[name])["json_schema"]["schema"] for i in (1, 2))
    ids = [{id(n) for n in _containers(s)} for s in (static_schema(module.Output), first, second)]
    assert not ids[0] & ids[1] and not ids[1] & ids[2]
    for node in _containers(first):
        if isinstance(node, dict) and node.get("type") == "array":
            node["maxItems"] = 0
    assert json.dumps(static_schema(module.Output), sort_keys=True) == before


# An answer per task with one id slot, filled with the id under test.
def _answer(name: str, alias: str) -> dict:
    return {
        "stage1_extraction": {"facts": [{"text": "x", "subject": "x", "importance": 5, "polarity": "positive",
                                         "source_turn_ids": [alias]}]},
        "stage2_classification": {"classifications": [{"fact_id": "F1", "observation_id": alias,
                                                       "relation": "reinforce"}]},
        "candidate_rerank": {"observation_ids": [alias]},
        "surfaced_feedback": {"decisions": [{"id": alias, "decision": "confirm"}]},
        "negative_keyword_target": {"target_ids": [alias], "forget": False},
        "reflection_synthesis": {"reflections": [{"text": "x", "subject": "x", "source_fact_ids": [alias]}]},
        "merge_decision": {"action": "merge", "target_id": alias, "text": "x"},
        # -- correction work --
        "correction": {"decisions": [{"id": alias, "action": "keep_new", "text": ""}]},
        "refine_cluster": {"actions": [{"action": "discard", "source_ids": [alias], "texts": [], "reason": "x"}]},
    }[name]


OFFERED = {"stage1_extraction": "T2", "reflection_synthesis": "F2", "correction": "C2"}


# Every prompt whose output names an id (all but the memo of recent_summary, today).
NAMING_IDS = sorted(n for n in PROMPTS if ALIAS_KEY in json.dumps(static_schema(PROMPTS[n].Output)))


@pytest.mark.parametrize("name", NAMING_IDS)
def test_enum_schema_accepts_the_calls_aliases_and_nothing_else(name):
    schema = response_format(PROMPTS[name], calls(2)[name])["json_schema"]["schema"]
    jsonschema.validate(_answer(name, OFFERED.get(name, "O2")), schema)
    for invented in ("O3", "T3", "F3", "O9", "r-0000000000000001", "", "o1"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(_answer(name, invented), schema)


def test_list_caps_follow_the_call():
    schema = response_format(surfaced_feedback, calls(2)["surfaced_feedback"])["json_schema"]["schema"]
    assert schema["properties"]["decisions"]["maxItems"] == 2
    schema = response_format(candidate_rerank, calls(1)["candidate_rerank"])["json_schema"]["schema"]
    assert schema["properties"]["observation_ids"]["maxItems"] == 1


def test_merge_input_carries_evidence_scores():
    payload = calls(2)["merge_decision"].payload
    assert payload.reflection.score == 2.0 and [e.score for e in payload.persona_entries] == [0.5, 1.0]
