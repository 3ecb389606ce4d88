"""Reflection synthesis: turn facts into short observations about the user, with their sources."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Fact, Observation, ReflectionDraft
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    FactAlias,
    Subject,
    Task,
    TaskOutput,
    TaskPayload,
    Text,
    Wire,
    WireIn,
    fit_answer,
    real_ids,
    render_json,
    unique,
)
from credence.streams.llm.prompts.stage2_classification import FactRef, fact_refs
from credence.streams.llm.rules import synthesis
from credence.streams.scope.tasks import TaskName

NAME = "reflection_synthesis"
VERSION = 4
MAX_TOKENS = 1024
MAX_REFLECTIONS = 10
MAX_EXISTING = 8

SYSTEM = f"""You write reflections: short, durable observations about a user, synthesised from facts
the user stated. existing lists observations already kept about the user.

- Group facts about the same subject into one reflection; when facts disagree, the latest one (last
  in the input) wins.
- Leave out a group that only restates an existing observation, also in other words or with a small
  detail added ("The user is learning French with a tutor." when "The user is learning French." exists).
  Return {{"reflections": []}} when every group does, or when there are no durable facts.
- text: one third-person sentence in the language of the facts ("The user likes coffee."), that reads
  alone: the thing named, never "it", "them", "this", "that", "there", "this park" or "him"/"her"
  without it, nothing that ends on a dash or a dangling "and", never "what they do"; never first person
  (I, me, my, we); nothing about the AI character or "you"; complete, never cut off. A fact that does
  not read alone only adds its id to the group it belongs to, or is left out.
- subject: the lowercase English key phrase the reflection is about.
- source_fact_ids: the ids of every fact the reflection rests on.
{DATA_RULE}

Examples:
INPUT: {{"facts":[{{"id":"F1","text":"The user likes coffee.","subject":"coffee","polarity":"positive"}},{{"id":"F2","text":"The user has a dog.","subject":"dog","polarity":"positive"}},{{"id":"F3","text":"The user stopped drinking coffee.","subject":"coffee","polarity":"negative"}}],"existing":[]}}
OUTPUT: {{"reflections":[{{"text":"The user no longer drinks coffee.","subject":"coffee","source_fact_ids":["F1","F3"]}},{{"text":"The user has a dog.","subject":"dog","source_fact_ids":["F2"]}}]}}

INPUT: {{"facts":[{{"id":"F1","text":"The user has two dogs.","subject":"dog","polarity":"positive"}},{{"id":"F2","text":"The user loves them.","subject":"dog","polarity":"positive"}},{{"id":"F3","text":"The user loves your stories.","subject":"stories","polarity":"positive"}}],"existing":[{{"text":"The user has a dog.","subject":"dog"}}]}}
OUTPUT: {{"reflections":[{{"text":"The user loves their two dogs.","subject":"dog","source_fact_ids":["F1","F2"]}}]}}

INPUT: {{"facts":[{{"id":"F1","text":"Der Nutzer liebt Jazz.","subject":"jazz","polarity":"positive"}}],"existing":[{{"text":"The user enjoys jazz music.","subject":"jazz"}}]}}
OUTPUT: {{"reflections":[]}}

INPUT: {{"facts":[{{"id":"F1","text":"La usuaria aprende alemán.","subject":"german","polarity":"positive"}}],"existing":[{{"text":"The user lives in Madrid.","subject":"home"}}]}}
OUTPUT: {{"reflections":[{{"text":"La usuaria está aprendiendo alemán.","subject":"german","source_fact_ids":["F1"]}}]}}

{JSON_RULE}"""


class ExistingRef(WireIn):
    text: str
    subject: str = ""


class Input(WireIn):
    facts: list[FactRef]
    existing: list[ExistingRef]


class Draft(Wire):
    text: Text
    subject: Subject
    source_fact_ids: list[FactAlias] = Field(min_length=1, max_length=20)


class Output(Wire):
    reflections: list[Draft] = Field(max_length=MAX_REFLECTIONS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(facts: Sequence[Fact], related: Sequence[Observation] = ()) -> Call:
    inputs = (facts, related)
    facts = unique(facts)
    ids = Aliases("F", [f.id for f in facts])
    payload = Input(facts=fact_refs(facts, ids),
                    existing=[ExistingRef(text=o.text, subject=o.subject) for o in related[:MAX_EXISTING]])

    def read(out: Output, reader: Reader) -> list[ReflectionDraft]:
        drafts = []
        for r in out.reflections:
            sources = real_ids(reader, ids, list(r.source_fact_ids))
            if not sources:
                reader.drop(r.text, "cites no fact of the input")
                continue
            drafts.append(ReflectionDraft(text=r.text.strip(), subject=r.subject.strip().lower(),
                                          source_fact_ids=sources))
        return drafts

    return Call(payload, {"F": ids.names}, read, inputs=inputs, empty=[] if not facts else None)


# -- the task ---------------------------------------------------------------------------------------

class SynthesisPayload(TaskPayload):
    facts: list[Fact]
    related: list[Observation] = []


class SynthesisOutput(TaskOutput):
    drafts: list[ReflectionDraft]


async def _run(backend, prompt, p: SynthesisPayload, rank) -> SynthesisOutput:
    return SynthesisOutput(drafts=await backend.ask(prompt, p.facts, p.related))


TASK = Task(TaskName.SYNTHESIS, SynthesisPayload, _run, SynthesisOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(facts: Sequence[Fact], related: Sequence[Observation] = ()) -> list[ReflectionDraft]:
    drafts = [d.model_dump() for d in synthesis.synthesize(facts, related)]
    return [ReflectionDraft.model_validate(d) for d in fit_answer(Output, {"reflections": drafts})["reflections"]]
