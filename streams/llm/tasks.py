"""The one registry of the pipeline's LLM tasks: the name a scope's request carries (`TaskName`), the
payload the scope builds (validated here before any call), the prompt modules the task's calls use, how the
runner executes it through a backend, and the output it answers with. The scope's side of each task (the
function that builds its payload, the one that applies its output) is bound to the same name one layer down,
in credence.streams.scope.results.SCOPE_TASKS; a unit test holds the two together.

A task is called by its `TaskName` in code. Three other names it meets are not the task's: a prompt's
NAME (reflection_synthesis: the key of CREDENCE_LLM__MODELS and the schema name a server sees), the
backend's method (a verb for the call: synthesize, classify), and the keys of what is stored (an output's
"drafts", the model's "reflections"), which old records carry and so stay as they are.

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
from credence.streams.llm.models import (
    Classification,
    CorrectionDecision,
    CorrectionItem,
    Fact,
    FeedbackDecision,
    MergeDecision,
    Observation,
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
from credence.streams.scope.tasks import TaskName

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


# -- correction work (issue 32 item 1) --
class CorrectionPayload(_Payload):
    corrections: list[CorrectionItem]


class RefinePayload(_Payload):
    entries: list[Observation]  # one cluster; its hash and member versions ride along for the handler


# What a task answers: its dump is the result record's "output", which the scope's handler reads. The keys
# are on credence.control/credence.facts and in speculative answers saved in scope state: they stay as they are.
class _Output(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Stage1Output(_Output):
    facts: list[Fact]


class Stage2Output(_Output):
    classifications: list[Classification]


class SynthesisOutput(_Output):
    drafts: list[ReflectionDraft]


class FeedbackOutput(_Output):
    decisions: list[FeedbackDecision]


class TargetOutput(_Output):
    ids: list[str]
    forget: bool = False  # the user asked to forget the targets (older answers lack it: a rebuttal)


class PromotionOutput(_Output):
    decision: MergeDecision


# -- correction work (issue 32 item 1) --
class CorrectionOutput(_Output):
    decisions: list[CorrectionDecision]


class RefineOutput(_Output):
    actions: list[RefineAction]


async def _stage1(backend: LLMBackend, p: Stage1Payload, rank: Rank | None) -> Stage1Output:
    return Stage1Output(facts=await backend.extract_facts(p.turns))


async def _stage2(backend: LLMBackend, p: Stage2Payload, rank: Rank | None) -> Stage2Output:
    obs = list(p.observations)
    if rank is not None:
        obs = await rank(p.facts, obs)
    if p.rerank_limit:
        keep = await backend.rerank(p.facts, obs, p.rerank_limit)
        by_id = {o.id: o for o in obs}
        obs = [by_id[i] for i in keep if i in by_id]
    return Stage2Output(classifications=await backend.classify(p.facts, obs) if obs else [])


async def _synthesis(backend: LLMBackend, p: SynthesisPayload, rank: Rank | None) -> SynthesisOutput:
    return SynthesisOutput(drafts=await backend.synthesize(p.facts, p.related))


async def _feedback(backend: LLMBackend, p: FeedbackPayload, rank: Rank | None) -> FeedbackOutput:
    return FeedbackOutput(decisions=await backend.check_feedback(p.reply_text, p.surfaced, p.ai_text))


async def _target(backend: LLMBackend, p: TargetPayload, rank: Rank | None) -> TargetOutput:
    answer = await backend.target_check(p.messages, p.observations, p.ai_text)
    return TargetOutput(ids=list(answer.ids), forget=answer.forget)


async def _promotion(backend: LLMBackend, p: PromotionPayload, rank: Rank | None) -> PromotionOutput:
    return PromotionOutput(decision=await backend.merge_decision(p.reflection, p.personas))


# -- correction work (issue 32 item 1) --
async def _correction(backend: LLMBackend, p: CorrectionPayload, rank: Rank | None) -> CorrectionOutput:
    return CorrectionOutput(decisions=await backend.correct(p.corrections))


async def _refine(backend: LLMBackend, p: RefinePayload, rank: Rank | None) -> RefineOutput:
    return RefineOutput(actions=await backend.refine(p.entries))


# -- summarise: the recent conversation's memo (its own block, issue 32 item 3) ------------------------

class SummarisePayload(_Payload):
    memo: str = ""
    turns: list[Turn]
    max_tokens: int


class SummariseOutput(_Output):
    summary: str


async def _summarise(backend: LLMBackend, p: SummarisePayload, rank: Rank | None) -> SummariseOutput:
    return SummariseOutput(summary=await backend.summarise(p.memo, p.turns, p.max_tokens))


@dataclass(frozen=True)
class Task:
    name: TaskName
    payload: type[_Payload]
    prompts: tuple[ModuleType, ...]
    run: Callable[[LLMBackend, Any, Rank | None], Awaitable[_Output]]
    output: type[_Output]

    async def execute(self, backend: LLMBackend, raw: dict, rank: Rank | None = None) -> dict:
        try:
            payload = self.payload.model_validate(raw)
        except ValidationError as exc:
            raise LLMError(f"LLM task {self.name}: the request payload does not validate: {exc}") from exc
        return (await self.run(backend, payload, rank)).model_dump()


TASKS: dict[TaskName, Task] = {t.name: t for t in (
    Task(TaskName.STAGE1, Stage1Payload, (stage1_extraction,), _stage1, Stage1Output),
    Task(TaskName.STAGE2, Stage2Payload, (candidate_rerank, stage2_classification), _stage2, Stage2Output),
    Task(TaskName.SYNTHESIS, SynthesisPayload, (reflection_synthesis,), _synthesis, SynthesisOutput),
    Task(TaskName.FEEDBACK, FeedbackPayload, (surfaced_feedback,), _feedback, FeedbackOutput),
    Task(TaskName.TARGET, TargetPayload, (negative_keyword_target,), _target, TargetOutput),
    Task(TaskName.PROMOTION, PromotionPayload, (merge_decision,), _promotion, PromotionOutput),
    # -- correction work (issue 32 item 1) --
    Task(TaskName.CORRECTION, CorrectionPayload, (correction,), _correction, CorrectionOutput),
    Task(TaskName.REFINE, RefinePayload, (refine_cluster,), _refine, RefineOutput),
    Task(TaskName.SUMMARISE, SummarisePayload, (recent_summary,), _summarise, SummariseOutput),
)}
