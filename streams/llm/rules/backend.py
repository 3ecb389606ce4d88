"""The deterministic offline backend: no network, same answers for the same input, every time.

Its answers keep to the same bounds as a model's on the wire (each task's Output schema: sentence and
subject lengths, item counts, enums), so nothing the rules logic says in process could not have come
from a model server; ids stay real, as the wire path's reader returns them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType

from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.streams.llm.backend import LLMBackend, LLMStats
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
    negative_keyword_target,
    recent_summary,
    refine_cluster,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.prompts import correction as correction_prompt
from credence.streams.llm.prompts import (
    merge_decision as merge_prompt,
)
from credence.streams.llm.prompts.base import fit_to_schema, static_schema
from credence.streams.llm.rules import correction_work, extraction, feedback, matching, refusals, summary, synthesis
from credence.streams.llm.rules import refine as refine_rules
from credence.streams.llm.token_budget import CountTokens, approx_tokens, fit_rerank, fit_stage2
from credence.tables.origin import fact_id

log = logging.getLogger(__name__)

LABEL = "rules (offline fallback — no LLM server configured)"


def _wire(module: ModuleType, answer: dict) -> dict:
    """The answer cut to the task's wire bounds; id fields are left alone (real ids, not aliases)."""
    return fit_to_schema(static_schema(module.Output), answer, aliases=False)


def _bounded_facts(facts: list[Fact]) -> list[Fact]:
    out: dict[str, Fact] = {}
    for d in _wire(stage1_extraction, {"facts": [f.model_dump() for f in facts]})["facts"]:
        # The id is the content's, as the wire path's reader derives it from the (cut) text and subject.
        fid = fact_id(d["source_turn_ids"], d["subject"], d["polarity"], d["text"])
        out.setdefault(fid, Fact.model_validate(d | {"id": fid}))
    return list(out.values())


class RulesBackend(LLMBackend):
    in_process = True

    def __init__(
        self,
        *,
        observation_cap: int = SEED_CAPS.stage2_observation_max_tokens,
        prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens,
        count_tokens: CountTokens = approx_tokens,
    ) -> None:
        self._stats = LLMStats()
        self._observation_cap = observation_cap
        self._prompt_cap = prompt_cap
        self._count_tokens = count_tokens
        log.warning(
            "LLM backend: %s; extraction and classification are pattern-based. "
            "Set CREDENCE_LLM__BACKEND=openai and CREDENCE_LLM__BASE_URL to use a model server.",
            LABEL,
        )

    @property
    def label(self) -> str:
        return LABEL

    def refused(self) -> dict[str, int]:
        """"<stage>:<reason>" -> statements this process's rules dropped by the self-containment gate
        before answering (refusals.py); /metrics adds them to the step's own refusals."""
        return refusals.counts()

    @property
    def stats(self) -> LLMStats:
        return self._stats

    def _count(self) -> None:
        self._stats.calls += 1

    async def extract_facts(self, turns: Sequence[Turn]) -> list[Fact]:
        self._count()
        return _bounded_facts(extraction.extract_facts(turns))

    async def classify(self, facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Classification]:
        self._count()
        # The same budget as the model path, so both backends see the same candidates.
        fitted = fit_stage2(
            facts, observations, observation_cap=self._observation_cap,
            prompt_cap=self._prompt_cap, count_tokens=self._count_tokens,
        )
        pairs = [c.model_dump() for c in matching.classify(facts, fitted)]
        return [Classification.model_validate(c)
                for c in _wire(stage2_classification, {"classifications": pairs})["classifications"]]

    async def rerank(self, facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[str]:
        self._count()
        fitted = fit_rerank(facts, observations, limit, observation_cap=self._observation_cap,
                            prompt_cap=self._prompt_cap, count_tokens=self._count_tokens)
        return _wire(candidate_rerank, {"observation_ids": matching.rerank(facts, fitted, limit)})["observation_ids"]

    async def check_feedback(self, reply_text: str, surfaced: Sequence[Observation],
                             ai_text: str = "") -> list[FeedbackDecision]:
        self._count()
        decisions = feedback.check_feedback(reply_text, surfaced)
        said = _wire(surfaced_feedback, {"decisions": [d.model_dump() for d in decisions]})["decisions"]
        # As the wire path's reader does: a reflection left out of the bounded answer was not addressed.
        return [*(FeedbackDecision.model_validate(d) for d in said),
                *(FeedbackDecision(id=d.id, decision="ignore") for d in decisions[len(said):])]

    async def target_check(self, last_user_messages: Sequence[str], observations: Sequence[Observation],
                           ai_text: str = "") -> RebuttalTarget:
        self._count()
        ids = matching.target_check(last_user_messages[-3:], observations, ai_text)
        forget = feedback.asks_to_forget(last_user_messages[-1]) if last_user_messages else False
        wired = _wire(negative_keyword_target, {"target_ids": ids, "forget": forget})
        return RebuttalTarget(ids=wired["target_ids"], forget=wired["forget"])

    async def synthesize(self, facts: Sequence[Fact], related: Sequence[Observation] = ()) -> list[ReflectionDraft]:
        self._count()
        drafts = [d.model_dump() for d in synthesis.synthesize(facts, related)]
        return [ReflectionDraft.model_validate(d)
                for d in _wire(reflection_synthesis, {"reflections": drafts})["reflections"]]

    async def merge_decision(
        self, reflection: ReflectionDraft, persona_entries: Sequence[Observation]
    ) -> MergeDecision:
        self._count()
        decision = synthesis.merge_decision(reflection, persona_entries)
        return MergeDecision.model_validate(_wire(merge_prompt, decision.model_dump()))

    # -- correction work (issue 32 item 1) --
    async def correct(self, items: Sequence[CorrectionItem]) -> list[CorrectionDecision]:
        self._count()
        items = list(items)[:correction_prompt.MAX_ITEMS]  # the call's bound, as on the wire
        said = [d.model_dump() for d in correction_work.correct(items)]
        return [CorrectionDecision.model_validate(d)
                for d in _wire(correction_prompt, {"decisions": said})["decisions"]]

    async def refine(self, entries: Sequence[Observation]) -> list[RefineAction]:
        self._count()
        actions = [a.model_dump() for a in refine_rules.refine(entries)]
        return [RefineAction.model_validate(a) for a in _wire(refine_cluster, {"actions": actions})["actions"]]

    async def summarise(self, memo: str, turns: Sequence[Turn], max_tokens: int) -> str:
        self._count()
        return _wire(recent_summary, {"summary": summary.summarise(memo, turns, max_tokens)})["summary"]
