"""The rules backend's answer to each prompt, registered by the prompt it answers (`@answers(prompt)`).
An answer takes the arguments the prompt's build took (`Call.inputs`: real ids, whole texts) and returns
what the prompt's call reads back, held to the same bounds as a model's answer on the wire (each prompt's
Output schema: sentence and subject lengths, item counts, enums); ids stay real, as the wire path's reader
returns them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from credence.streams.llm.models import (
    Classification,
    CorrectionDecision,
    CorrectionItem,
    Fact,
    FeedbackDecision,
    MergeDecision,
    Observation,
    RebuttalTarget,
    RefineAction,
    ReflectionDraft,
    Turn,
)
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
from credence.streams.llm.prompts.base import fit_to_schema, static_schema
from credence.streams.llm.rules import correction_work, extraction, feedback, matching, summary, synthesis
from credence.streams.llm.rules import refine as refine_rules
from credence.tables.origin import fact_id

Answer = Callable[..., Any]
ANSWERS: dict[str, Answer] = {}  # prompt NAME -> its rules answer


def answers(prompt: ModuleType) -> Callable[[Answer], Answer]:
    """Registers the decorated function as the rules answer to `prompt`."""
    def register(answer: Answer) -> Answer:
        ANSWERS[prompt.NAME] = answer
        return answer
    return register


def wire(prompt: ModuleType, answer: dict) -> dict:
    """The answer cut to the prompt's wire bounds; id fields are left alone (real ids, not aliases)."""
    return fit_to_schema(static_schema(prompt.Output), answer, aliases=False)


@answers(stage1_extraction)
def _stage1(turns: Sequence[Turn]) -> list[Fact]:
    out: dict[str, Fact] = {}
    facts = [f.model_dump() for f in extraction.extract_facts(turns)]
    for d in wire(stage1_extraction, {"facts": facts})["facts"]:
        # The id is the content's, as the wire path's reader derives it from the (cut) text and subject.
        fid = fact_id(d["source_turn_ids"], d["subject"], d["polarity"], d["text"])
        out.setdefault(fid, Fact.model_validate(d | {"id": fid}))
    return list(out.values())


@answers(stage2_classification)
def _stage2(facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Classification]:
    pairs = [c.model_dump() for c in matching.classify(facts, observations)]
    return [Classification.model_validate(c)
            for c in wire(stage2_classification, {"classifications": pairs})["classifications"]]


@answers(candidate_rerank)
def _rerank(facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[str]:
    return wire(candidate_rerank, {"observation_ids": matching.rerank(facts, observations, limit)})["observation_ids"]


@answers(surfaced_feedback)
def _feedback(reply_text: str, surfaced: Sequence[Observation], ai_text: str = "") -> list[FeedbackDecision]:
    decisions = feedback.check_feedback(reply_text, surfaced)
    said = wire(surfaced_feedback, {"decisions": [d.model_dump() for d in decisions]})["decisions"]
    # As the wire path's reader does: a reflection left out of the bounded answer was not addressed.
    return [*(FeedbackDecision.model_validate(d) for d in said),
            *(FeedbackDecision(id=d.id, decision="ignore") for d in decisions[len(said):])]


@answers(negative_keyword_target)
def _target(last_user_messages: Sequence[str], observations: Sequence[Observation], ai_text: str = "") -> RebuttalTarget:
    ids = matching.target_check(last_user_messages[-3:], observations, ai_text)
    forget = feedback.asks_to_forget(last_user_messages[-1]) if last_user_messages else False
    wired = wire(negative_keyword_target, {"target_ids": ids, "forget": forget})
    return RebuttalTarget(ids=wired["target_ids"], forget=wired["forget"])


@answers(reflection_synthesis)
def _synthesis(facts: Sequence[Fact], related: Sequence[Observation] = ()) -> list[ReflectionDraft]:
    drafts = [d.model_dump() for d in synthesis.synthesize(facts, related)]
    return [ReflectionDraft.model_validate(d) for d in wire(reflection_synthesis, {"reflections": drafts})["reflections"]]


@answers(merge_decision)
def _merge(reflection: ReflectionDraft, persona_entries: Sequence[Observation]) -> MergeDecision:
    decision = synthesis.merge_decision(reflection, persona_entries)
    return MergeDecision.model_validate(wire(merge_decision, decision.model_dump()))


@answers(correction)
def _correction(items: Sequence[CorrectionItem]) -> list[CorrectionDecision]:
    items = list(items)[:correction.MAX_ITEMS]  # the call's bound, as on the wire
    said = [d.model_dump() for d in correction_work.correct(items)]
    return [CorrectionDecision.model_validate(d) for d in wire(correction, {"decisions": said})["decisions"]]


@answers(refine_cluster)
def _refine(entries: Sequence[Observation]) -> list[RefineAction]:
    actions = [a.model_dump() for a in refine_rules.refine(entries)]
    return [RefineAction.model_validate(a) for a in wire(refine_cluster, {"actions": actions})["actions"]]


@answers(recent_summary)
def _summary(memo: str, turns: Sequence[Turn], max_tokens: int) -> str:
    return wire(recent_summary, {"summary": summary.summarise(memo, turns, max_tokens)})["summary"]
