"""Merge-on-promote: create a persona entry, merge into an existing one, or reject."""

from __future__ import annotations

from collections.abc import Sequence

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import MergeAction, MergeDecision, Observation, ReflectionDraft
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    Task,
    TaskOutput,
    TaskPayload,
    Text,
    Wire,
    WireIn,
    alias_field,
    fit_answer,
    render_json,
    unique,
)
from credence.streams.llm.rules import synthesis
from credence.streams.scope.tasks import TaskName

NAME = "merge_decision"
VERSION = 2
MAX_TOKENS = 256
NO_TARGET = "none"

SYSTEM = f"""A reflection about the user has earned promotion into the character's persona notes.
Each item carries score, its evidence score from the user's own signals (higher = better supported).
Decide how the reflection enters the notes:
- "merge": an entry covers the same subject. If they agree, target_id is that entry and text is one
  merged sentence. If they contradict and the reflection's score is HIGHER than the entry's, the user
  changed their mind: still "merge" into that entry, with text saying the new state.
- "reject": the reflection contradicts an entry whose score is equal or higher, or the reflection is
  empty. target_id "none".
- "create": no entry covers the subject; target_id "none" and text is the new entry.
A related but different subject ("cats" vs "dogs") is not the same subject.
{DATA_RULE}

Examples:
INPUT: {{"reflection":{{"text":"The user loves hiking in the Alps.","subject":"hiking","score":2.1}},"persona_entries":[{{"id":"O1","text":"The user enjoys hiking.","subject":"hiking","score":1.5}}]}}
OUTPUT: {{"action":"merge","target_id":"O1","text":"The user loves hiking, especially in the Alps."}}

INPUT: {{"reflection":{{"text":"The user no longer eats meat.","subject":"meat","score":2.4}},"persona_entries":[{{"id":"O1","text":"The user loves steak.","subject":"meat","score":0.5}}]}}
OUTPUT: {{"action":"merge","target_id":"O1","text":"The user no longer eats meat."}}

INPUT: {{"reflection":{{"text":"Der Nutzer mag keinen Tee.","subject":"tea","score":2.0}},"persona_entries":[{{"id":"O1","text":"The user drinks tea every morning.","subject":"tea","score":3.5}}]}}
OUTPUT: {{"action":"reject","target_id":"none","text":""}}

INPUT: {{"reflection":{{"text":"El usuario tiene un gato.","subject":"cat","score":2.0}},"persona_entries":[{{"id":"O1","text":"The user has a dog.","subject":"dog","score":1.0}}]}}
OUTPUT: {{"action":"create","target_id":"none","text":"El usuario tiene un gato."}}

{JSON_RULE}"""


class ReflectionRef(WireIn):
    text: str
    subject: str
    score: float


class EntryRef(WireIn):
    id: str
    text: str
    subject: str
    score: float


class Input(WireIn):
    reflection: ReflectionRef
    persona_entries: list[EntryRef]


TargetAlias = alias_field("target")  # "none" or one of the call's O aliases


class Output(Wire):
    action: MergeAction
    target_id: TargetAlias  # type: ignore[valid-type]
    text: Text


def render_user(payload: Input) -> str:
    return render_json(payload)


def _score(value: float | None) -> float:
    return round(value, 2) if value is not None else 0.0


def build(reflection: ReflectionDraft, persona_entries: Sequence[Observation]) -> Call:
    inputs = (reflection, persona_entries)
    persona_entries = unique(persona_entries)
    ids = Aliases("O", [e.id for e in persona_entries])
    payload = Input(
        reflection=ReflectionRef(text=reflection.text, subject=reflection.subject, score=_score(reflection.score)),
        persona_entries=[EntryRef(id=ids.alias(e.id), text=e.text, subject=e.subject, score=_score(e.score))
                         for e in persona_entries],
    )

    def read(out: Output, reader: Reader) -> MergeDecision:
        if out.action != "merge":
            return MergeDecision(action=out.action, target_id=None, text=out.text.strip())
        target = ids.get(out.target_id)
        if target is None:
            # A merge into nothing the call offered: the conservative answer is to keep the reflection
            # confirmed (its attempt is counted; the throttle retries it), never to invent an entry.
            reader.drop(out.target_id, "merge without a known target; rejected")
            return MergeDecision(action="reject", target_id=None, text=out.text.strip())
        return MergeDecision(action="merge", target_id=target, text=out.text.strip())

    return Call(payload, {"target": [NO_TARGET, *ids.names]}, read, inputs=inputs)


# -- the task: a reflection's promotion ----------------------------------------------------------------

class PromotionPayload(TaskPayload):
    reflection: ReflectionDraft
    personas: list[Observation]


class PromotionOutput(TaskOutput):
    decision: MergeDecision


async def _run(backend, prompt, p: PromotionPayload, rank) -> PromotionOutput:
    return PromotionOutput(decision=await backend.ask(prompt, p.reflection, p.personas))


TASK = Task(TaskName.PROMOTION, PromotionPayload, _run, PromotionOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(reflection: ReflectionDraft, persona_entries: Sequence[Observation]) -> MergeDecision:
    decision = synthesis.merge_decision(reflection, persona_entries)
    return MergeDecision.model_validate(fit_answer(Output, decision.model_dump()))
