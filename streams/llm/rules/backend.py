"""The deterministic offline backend: no network, same answers for the same input, every time."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.streams.llm.backend import LLMBackend, LLMStats
from credence.streams.llm.models import (
    Classification,
    Fact,
    FeedbackDecision,
    MergeDecision,
    Observation,
    ReflectionDraft,
    Turn,
)
from credence.streams.llm.rules import extraction, feedback, matching, synthesis
from credence.streams.llm.token_budget import CountTokens, approx_tokens, fit_rerank, fit_stage2

log = logging.getLogger(__name__)

LABEL = "rules (offline fallback — no LLM server configured)"


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

    @property
    def stats(self) -> LLMStats:
        return self._stats

    def _count(self) -> None:
        self._stats.calls += 1

    async def extract_facts(self, turns: Sequence[Turn]) -> list[Fact]:
        self._count()
        return extraction.extract_facts(turns)

    async def classify(self, facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Classification]:
        self._count()
        # The same budget as the model path, so both backends see the same candidates.
        fitted = fit_stage2(
            facts, observations, observation_cap=self._observation_cap,
            prompt_cap=self._prompt_cap, count_tokens=self._count_tokens,
        )
        return matching.classify(facts, fitted)

    async def rerank(self, facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[str]:
        self._count()
        fitted = fit_rerank(facts, observations, limit, observation_cap=self._observation_cap,
                            prompt_cap=self._prompt_cap, count_tokens=self._count_tokens)
        return matching.rerank(facts, fitted, limit)

    async def check_feedback(self, reply_text: str, surfaced: Sequence[Observation],
                             ai_text: str = "") -> list[FeedbackDecision]:
        self._count()
        return feedback.check_feedback(reply_text, surfaced)

    async def target_check(self, last_user_messages: Sequence[str], observations: Sequence[Observation],
                           ai_text: str = "") -> list[str]:
        self._count()
        return matching.target_check(last_user_messages[-3:], observations)

    async def synthesize(self, facts: Sequence[Fact], related: Sequence[Observation] = ()) -> list[ReflectionDraft]:
        self._count()
        return synthesis.synthesize(facts, related)

    async def merge_decision(
        self, reflection: ReflectionDraft, persona_entries: Sequence[Observation]
    ) -> MergeDecision:
        self._count()
        return synthesis.merge_decision(reflection, persona_entries)
