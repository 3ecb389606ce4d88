"""What the OpenAI-compatible test server answers (the rules backend's logic, in each task's aliased
wire format), the failures it can inject, and what it demands of a request's output schema."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from credence.streams.llm.models import Fact, Observation, ReflectionDraft, Turn
from credence.streams.llm.prompts import (
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
from credence.streams.llm.prompts.base import ALIAS_KEY, ALLOWED_KEYWORDS, static_schema
from credence.streams.llm.rules import correction_work, extraction, feedback, matching, summary, synthesis
from credence.streams.llm.rules import refine as refine_rules

# -- answers: the rules logic in each task's wire format ---------------------------------------

def _facts(refs: list[stage2_classification.FactRef]) -> list[Fact]:
    return [
        Fact(id=r.id, text=r.text, subject=r.subject, polarity=r.polarity, importance=5, source_turn_ids=[])
        for r in refs
    ]


def _observations(refs: Sequence[Any]) -> list[Observation]:
    return [Observation(id=getattr(r, "id", ""), text=r.text, subject=r.subject,
                        score=getattr(r, "score", None)) for r in refs]


# Answers are plain JSON, not Output models: the rules logic can say more than the wire allows (a long
# subject, too many facts), and the server holds each answer to the request's own schema (fit_to_schema)
# before it goes out, as a guided decoder would.

def _stage1(inp: stage1_extraction.Input) -> dict:
    turns = [Turn(id=t.id, role=t.role, text=t.text, ts="") for t in inp.turns]
    return {"facts": [
        {"text": f.text, "subject": f.subject, "importance": f.importance, "polarity": f.polarity,
         "source_turn_ids": f.source_turn_ids}
        for f in extraction.extract_facts(turns)
    ]}


def _stage2(inp: stage2_classification.Input) -> dict:
    return {"classifications": [
        {"fact_id": c.fact_id, "observation_id": c.observation_id, "relation": c.relation}
        for c in matching.classify(_facts(inp.facts), _observations(inp.observations))
    ]}


def _rerank(inp: candidate_rerank.Input) -> dict:
    return {"observation_ids": matching.rerank(_facts(inp.facts), _observations(inp.observations), inp.limit)}


def _feedback(inp: surfaced_feedback.Input) -> dict:
    return {"decisions": [{"id": d.id, "decision": d.decision}
                          for d in feedback.check_feedback(inp.reply, _observations(inp.surfaced))]}


def _target(inp: negative_keyword_target.Input) -> dict:
    latest = inp.user_messages[-1] if inp.user_messages else ""
    return {"target_ids": matching.target_check(inp.user_messages, _observations(inp.observations), inp.ai_turn),
            "forget": feedback.asks_to_forget(latest)}


def _synthesis(inp: reflection_synthesis.Input) -> dict:
    return {"reflections": [
        {"text": r.text, "subject": r.subject, "source_fact_ids": r.source_fact_ids}
        for r in synthesis.synthesize(_facts(inp.facts), _observations(inp.existing))
    ]}


def _merge(inp: merge_decision.Input) -> dict:
    r = inp.reflection
    draft = ReflectionDraft(text=r.text, subject=r.subject, source_fact_ids=[], score=r.score)
    d = synthesis.merge_decision(draft, _observations(inp.persona_entries))
    return {"action": d.action, "target_id": d.target_id or merge_decision.NO_TARGET, "text": d.text}


# -- correction work --
def _correction(inp: correction.Input) -> dict:
    return {"decisions": [{"id": p.id, "action": action, "text": text}
                          for p in inp.pairs for action, text in [correction_work.decide(p.old, p.new)]]}


def _refine(inp: refine_cluster.Input) -> dict:
    actions = refine_rules.refine([Observation(id=e.id, text=e.text, score=e.score) for e in inp.entries])
    return {"actions": [{"action": a.action, "source_ids": a.source_ids, "texts": a.texts, "reason": a.reason}
                        for a in actions]}


def _summary(inp: recent_summary.Input) -> dict:
    turns = [Turn(id=f"t{i}", role=t.role, text=t.text, ts="x") for i, t in enumerate(inp.turns)]
    return {"summary": summary.summarise(inp.memo, turns, inp.max_tokens)}


ANSWERS: dict[str, Callable[[Any], dict]] = {
    stage1_extraction.NAME: _stage1,
    stage2_classification.NAME: _stage2,
    candidate_rerank.NAME: _rerank,
    surfaced_feedback.NAME: _feedback,
    negative_keyword_target.NAME: _target,
    reflection_synthesis.NAME: _synthesis,
    merge_decision.NAME: _merge,
    # -- correction work --
    correction.NAME: _correction,
    refine_cluster.NAME: _refine,
    recent_summary.NAME: _summary,
}

# -- a prompt with no answer above (a new one): the least answer its request's schema allows -------

def least_value(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """The smallest value the schema accepts: each required property, no list item beyond minItems,
    empty strings, an enum's first value, false, 0, null where allowed. A guided decoder with nothing to
    say emits this; a payload model's schema gives the smallest payload (optional fields keep defaults)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return least_value(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return None if {"type": "null"} in options else least_value(options[0], defs)
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: least_value(props[k], defs) for k in schema.get("required", [])}
    if kind == "array":
        return [least_value(schema.get("items", {}), defs) for _ in range(schema.get("minItems", 0))]
    return {"string": "x" * schema.get("minLength", 0), "integer": 0, "number": 0, "boolean": False}.get(kind)


def _alias_kinds(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node[ALIAS_KEY]] if ALIAS_KEY in node else []
        return own + [k for v in node.values() for k in _alias_kinds(v)]
    return [k for v in node for k in _alias_kinds(v)] if isinstance(node, list) else []


def _input_ids(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["id"]] if isinstance(node.get("id"), str) else []
        return own + [i for v in node.values() for i in _input_ids(v)]
    return [i for v in node for i in _input_ids(v)] if isinstance(node, list) else []


def ids_by_kind(module: ModuleType, inp: Any) -> list[list[str]]:
    """Per alias kind its Output names (T, F, O, C...), the ids of that kind the input carries, in order."""
    kinds = dict.fromkeys(_alias_kinds(static_schema(module.Output)))
    ids = dict.fromkeys(_input_ids(inp.model_dump()))
    return [[i for i in ids if i[:1] == kind and i[1:].isdigit()] for kind in kinds]


# Well-formed aliases no input of the tests reaches: they pass the static schema, not the call's enum.
GHOST = {"T": "T99", "F": "F99", "O": "O99"}


def _ghost_stage1(out: dict) -> dict:
    fact = {"text": "The user likes ghosts.", "subject": "ghost", "importance": 5, "polarity": "positive",
            "source_turn_ids": [GHOST["T"]]}
    return {"facts": [*out["facts"], fact]}


def _ghost_stage2(out: dict, inp: stage2_classification.Input) -> dict:
    pair = {"fact_id": inp.facts[0].id, "observation_id": GHOST["O"], "relation": "reinforce"}
    return {"classifications": [*out["classifications"], pair]}


# Output that passes the static schema but names an id the input never had.
UNKNOWN_ID: dict[str, Callable[[dict, Any], dict]] = {
    stage1_extraction.NAME: lambda out, inp: _ghost_stage1(out),
    stage2_classification.NAME: _ghost_stage2,
    candidate_rerank.NAME: lambda out, inp: {"observation_ids": [GHOST["O"]]},
    surfaced_feedback.NAME: lambda out, inp: {"decisions": [*out["decisions"], {"id": GHOST["O"], "decision": "deny"}]},
    negative_keyword_target.NAME: lambda out, inp: {"target_ids": [GHOST["O"]], "forget": False},
    reflection_synthesis.NAME: lambda out, inp: {"reflections": [{"text": "x", "subject": "x",
                                                                  "source_fact_ids": [GHOST["F"]]}]},
    merge_decision.NAME: lambda out, inp: {"action": "merge", "target_id": GHOST["O"], "text": "x"},
    # -- correction work --
    correction.NAME: lambda out, inp: {"decisions": [*out["decisions"], {"id": "C99", "action": "keep_new",
                                                                         "text": ""}]},
    refine_cluster.NAME: lambda out, inp: {"actions": [{"action": "discard", "source_ids": [GHOST["O"]],
                                                        "texts": [], "reason": "x"}]},
    recent_summary.NAME: lambda out, inp: out,  # a memo names no id
}


# -- what a request's schema must say ------------------------------------------------------------

def expected_id_enums(module: ModuleType, inp: Any) -> list[list[str]]:
    """The id lists the schema's enums must be: exactly the ids this input carries, per kind."""
    ids = lambda items: list(dict.fromkeys(i.id for i in items))  # noqa: E731
    return {
        stage1_extraction.NAME: lambda: [ids(inp.turns)],
        stage2_classification.NAME: lambda: [ids(inp.facts), ids(inp.observations)],
        candidate_rerank.NAME: lambda: [ids(inp.observations)],
        surfaced_feedback.NAME: lambda: [ids(inp.surfaced)],
        negative_keyword_target.NAME: lambda: [ids(inp.observations)],
        reflection_synthesis.NAME: lambda: [ids(inp.facts)],
        merge_decision.NAME: lambda: [[merge_decision.NO_TARGET, *ids(inp.persona_entries)]],
        # -- correction work --
        correction.NAME: lambda: [ids(inp.pairs)],
        refine_cluster.NAME: lambda: [ids(inp.entries)],
        recent_summary.NAME: lambda: [],
    }.get(module.NAME, lambda: ids_by_kind(module, inp))()  # a prompt not listed: every id of a kind it names


_VALUE_ENUMS = ({"positive", "negative"}, {"reinforce", "negate"}, {"confirm", "deny", "ignore"},
                {"create", "merge", "reject"}, {"merge", "keep_new", "keep_old", "keep_both"},
                {"split", "merge", "modify", "discard"})


def schema_problems(schema: Any, id_enums: list[list[str]]) -> list[str]:
    """Why vLLM's guided decoding could not enforce this schema, or it does not pin the call's ids."""
    problems: list[str] = []
    seen_enums: list[list[str]] = []

    def walk(node: Any, path: str) -> None:
        if not isinstance(node, dict):
            return
        bad = set(node) - ALLOWED_KEYWORDS
        if bad:
            problems.append(f"{path}: keywords {sorted(bad)} are not safe for guided decoding")
        kind = node.get("type")
        if kind == "object":
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: object not closed")
            if sorted(node.get("required", [])) != sorted(node.get("properties", {})):
                problems.append(f"{path}: not every property required")
            for name, sub in node.get("properties", {}).items():
                walk(sub, f"{path}.{name}")
        elif kind == "array":
            if "maxItems" not in node:
                problems.append(f"{path}: array without maxItems")
            walk(node.get("items"), f"{path}[]")
        elif kind == "string" and "enum" not in node and "maxLength" not in node:
            problems.append(f"{path}: free string without maxLength")
        enum = node.get("enum")
        if isinstance(enum, list) and all(isinstance(v, str) for v in enum) and set(enum) not in _VALUE_ENUMS:
            seen_enums.append(enum)

    walk(schema, "$")
    for enum in seen_enums:
        if enum not in id_enums:
            problems.append(f"id enum {enum[:6]} is not the input's ids")
    for wanted in id_enums:
        if wanted not in seen_enums:
            problems.append(f"the input's ids {wanted[:6]} are not an enum of the schema")
    return problems
