"""The one interface every LLM backend implements: one async method per task, typed in and out."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from credence.streams.llm.models import (
    Classification,
    Fact,
    FeedbackDecision,
    MergeDecision,
    Observation,
    ReflectionDraft,
    Turn,
)


@dataclass
class LLMStats:
    """Counters the pipeline reports. calls = task invocations; retries = extra attempts after a
    failure; failures = calls that ended in LLMError."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class LLMBackend(abc.ABC):
    @property
    @abc.abstractmethod
    def label(self) -> str:
        """How the backend shows itself in logs, stats and the UI."""

    @property
    @abc.abstractmethod
    def stats(self) -> LLMStats: ...

    @abc.abstractmethod
    async def extract_facts(self, turns: Sequence[Turn]) -> list[Fact]:
        """Stage 1: new facts about the user from a batch of turns."""

    @abc.abstractmethod
    async def classify(self, facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Classification]:
        """Stage 2: reinforce/negate per related (fact, observation) pair; unrelated pairs are omitted.
        Observations arrive best-ranked first and are cut to the Stage-2 token caps."""

    @abc.abstractmethod
    async def rerank(self, facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[str]:
        """Ids of at most `limit` observations worth sending to Stage 2, best first."""

    @abc.abstractmethod
    async def check_feedback(self, reply_text: str, surfaced: Sequence[Observation]) -> list[FeedbackDecision]:
        """One decision per surfaced reflection."""

    @abc.abstractmethod
    async def target_check(self, last_user_messages: Sequence[str], observations: Sequence[Observation]) -> list[str]:
        """Ids of the observations a rebuttal targets (possibly none)."""

    @abc.abstractmethod
    async def synthesize(self, facts: Sequence[Fact]) -> list[ReflectionDraft]: ...

    @abc.abstractmethod
    async def merge_decision(
        self, reflection: ReflectionDraft, persona_entries: Sequence[Observation]
    ) -> MergeDecision: ...

    async def aclose(self) -> None:
        """Release connections; the default holds none."""
