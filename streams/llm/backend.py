"""The one interface every LLM backend implements: one async method per task, typed in and out."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import asdict, dataclass

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


@dataclass
class LLMStats:
    """Counters the pipeline reports. calls = task invocations; retries = extra attempts after a
    failure; failures = calls that ended in LLMError; unknown_ids = output items dropped because they
    named an id the call never offered (the rest of that answer was applied)."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unknown_ids: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class LLMBackend(abc.ABC):
    # True for a backend that computes in the worker's own process, with no I/O (rules): its answer is
    # ready as soon as it is asked for.
    in_process: bool = False

    @property
    @abc.abstractmethod
    def label(self) -> str:
        """How the backend shows itself in logs, stats and the UI."""

    @property
    @abc.abstractmethod
    def stats(self) -> LLMStats: ...

    @property
    def concurrency_limit(self) -> int | None:
        """Requests the backend lets into flight now (adaptive for a model server); None: unbounded."""
        return None

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
    async def check_feedback(self, reply_text: str, surfaced: Sequence[Observation],
                             ai_text: str = "") -> list[FeedbackDecision]:
        """One decision per surfaced reflection; ai_text is the AI turn that surfaced them."""

    @abc.abstractmethod
    async def target_check(self, last_user_messages: Sequence[str], observations: Sequence[Observation],
                           ai_text: str = "") -> RebuttalTarget:
        """The observations a rebuttal or forget request targets (possibly none), and whether the user
        asks to forget them; ai_text is the AI's last turn."""

    @abc.abstractmethod
    async def synthesize(self, facts: Sequence[Fact], related: Sequence[Observation] = ()) -> list[ReflectionDraft]:
        """New reflections from facts; none for a subject that only restates a related observation."""

    @abc.abstractmethod
    async def merge_decision(
        self, reflection: ReflectionDraft, persona_entries: Sequence[Observation]
    ) -> MergeDecision:
        """Reflection and entries carry evidence scores: a contradiction rejects only against stronger
        evidence."""

    # -- correction work (issue 32 item 1) --
    @abc.abstractmethod
    async def correct(self, items: Sequence[CorrectionItem]) -> list[CorrectionDecision]:
        """For each queued correction: merge, keep_new, keep_old or keep_both; an item left out stays
        queued."""

    @abc.abstractmethod
    async def refine(self, entries: Sequence[Observation]) -> list[RefineAction]:
        """A cluster of closely related entries (with evidence scores): the split / merge / modify /
        discard actions it needs, none when it is fine as it is."""

    @abc.abstractmethod
    async def summarise(self, memo: str, turns: Sequence[Turn], max_tokens: int) -> str:
        """The recent conversation's new memo: the old memo and these older turns, in at most max_tokens."""

    async def aclose(self) -> None:
        """Release connections; the default holds none."""
