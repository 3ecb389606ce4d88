"""The one registry of the pipeline's LLM tasks: the name a scope's request carries, the payload the
scope builds (validated here before any call), the prompt modules the task's calls use, how the runner
executes it through a backend, and the name of the scope's result handler for it
(credence.streams.scope.results.HANDLERS is keyed by these names; a unit test holds the two together).

Payload models ignore unknown keys (a promotion's ticket rides along for the handler) and default the
context fields added later, so requests saved in a scope's state by an older worker still run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from credence.errors import LLMError
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.models import Fact, Observation, ReflectionDraft, Turn
from credence.streams.llm.prompts import (
    candidate_rerank,
    merge_decision,
    negative_keyword_target,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)

STAGE1, STAGE2, SYNTHESIS = "stage1", "stage2", "synthesis"
FEEDBACK, TARGET, PROMOTION = "feedback", "target", "promotion"

# Re-orders Stage-2 candidates (e.g. by embedding similarity) before the token caps cut the list.
Rank = Callable[[Sequence[Fact], Sequence[Observation]], Awaitable[list[Observation]]]


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Stage1Payload(_Payload):
    turns: list[Turn]


class Stage2Payload(_Payload):
    facts: list[Fact]
    observations: list[Observation]
    rerank_limit: int | None = None


class SynthesisPayload(_Payload):
    facts: list[Fact]
    related: list[Observation] = []


class FeedbackPayload(_Payload):
    reply_text: str
    surfaced: list[Observation]
    ai_text: str = ""


class TargetPayload(_Payload):
    messages: list[str]
    observations: list[Observation]
    ai_text: str = ""


class PromotionPayload(_Payload):
    reflection: ReflectionDraft
    personas: list[Observation]


async def _stage1(backend: LLMBackend, p: Stage1Payload, rank: Rank | None) -> dict:
    return {"facts": [f.model_dump() for f in await backend.extract_facts(p.turns)]}


async def _stage2(backend: LLMBackend, p: Stage2Payload, rank: Rank | None) -> dict:
    obs = list(p.observations)
    if rank is not None:
        obs = await rank(p.facts, obs)
    if p.rerank_limit:
        keep = await backend.rerank(p.facts, obs, p.rerank_limit)
        by_id = {o.id: o for o in obs}
        obs = [by_id[i] for i in keep if i in by_id]
    out = await backend.classify(p.facts, obs) if obs else []
    return {"classifications": [c.model_dump() for c in out]}


async def _synthesis(backend: LLMBackend, p: SynthesisPayload, rank: Rank | None) -> dict:
    return {"drafts": [d.model_dump() for d in await backend.synthesize(p.facts, p.related)]}


async def _feedback(backend: LLMBackend, p: FeedbackPayload, rank: Rank | None) -> dict:
    out = await backend.check_feedback(p.reply_text, p.surfaced, p.ai_text)
    return {"decisions": [d.model_dump() for d in out]}


async def _target(backend: LLMBackend, p: TargetPayload, rank: Rank | None) -> dict:
    return {"ids": list(await backend.target_check(p.messages, p.observations, p.ai_text))}


async def _promotion(backend: LLMBackend, p: PromotionPayload, rank: Rank | None) -> dict:
    return {"decision": (await backend.merge_decision(p.reflection, p.personas)).model_dump()}


@dataclass(frozen=True)
class Task:
    name: str
    payload: type[_Payload]
    prompts: tuple[ModuleType, ...]
    run: Callable[[LLMBackend, Any, Rank | None], Awaitable[dict]]
    handler: str  # the function in credence.streams.scope.results that applies the output

    async def execute(self, backend: LLMBackend, raw: dict, rank: Rank | None = None) -> dict:
        try:
            payload = self.payload.model_validate(raw)
        except ValidationError as exc:
            raise LLMError(f"LLM task {self.name}: the request payload does not validate: {exc}") from exc
        return await self.run(backend, payload, rank)


TASKS: dict[str, Task] = {t.name: t for t in (
    Task(STAGE1, Stage1Payload, (stage1_extraction,), _stage1, "_stage1"),
    Task(STAGE2, Stage2Payload, (candidate_rerank, stage2_classification), _stage2, "_stage2"),
    Task(SYNTHESIS, SynthesisPayload, (reflection_synthesis,), _synthesis, "_synthesis"),
    Task(FEEDBACK, FeedbackPayload, (surfaced_feedback,), _feedback, "_feedback"),
    Task(TARGET, TargetPayload, (negative_keyword_target,), _target, "_target"),
    Task(PROMOTION, PromotionPayload, (merge_decision,), _promotion, "_promotion"),
)}
