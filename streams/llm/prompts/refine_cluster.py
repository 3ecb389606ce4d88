"""Refinement: a cluster of closely related memories about the user, split / merged / modified / discarded."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Observation, RefineAction, RefineKind
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    ObsAlias,
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
from credence.streams.llm.rules import refine
from credence.streams.scope.tasks import TaskName

NAME = "refine_cluster"
VERSION = 1
MAX_TOKENS = 1024
MAX_ENTRIES = 6  # memory.refine_cluster_size_max's default: a cluster is small
MAX_ACTIONS = MAX_ENTRIES
MAX_PIECES = 4  # texts of one split
MAX_REASON = 80

SYSTEM = f"""You keep a character's memory of one user tidy. The entries below are closely related
memories about the user (each with its evidence score: higher = better supported by the user's own
signals). Decide what, if anything, needs refining:
- "split": one entry mixes independent facts; source_ids is that entry, texts are two or more sentences,
  one fact each.
- "merge": two or more entries say the same thing; source_ids are them, texts is the one merged sentence.
- "modify": one entry is unclear or incomplete and the others make it precise; texts is its new sentence.
- "discard": one entry is meaningless or says nothing lasting about the user.
Each id appears in at most one action. Every sentence is about "The user", readable alone, and says only
what the entries say. When the entries are fine as they are, answer {{"actions":[]}}. Two entries about
different things ("cats" and "dogs", "lives in" and "likes") are not the same thing.
{DATA_RULE}

Examples:
INPUT: {{"entries":[{{"id":"O1","text":"The user is learning French.","score":1.2}},{{"id":"O2","text":"The user is learning French with a tutor.","score":0.6}}]}}
OUTPUT: {{"actions":[{{"action":"merge","source_ids":["O1","O2"],"texts":["The user is learning French with a tutor."],"reason":"same fact"}}]}}

INPUT: {{"entries":[{{"id":"O1","text":"The user loves hiking and has a dog named Rex.","score":1.0}},{{"id":"O2","text":"The user loves hiking in the Alps.","score":0.4}}]}}
OUTPUT: {{"actions":[{{"action":"split","source_ids":["O1"],"texts":["The user loves hiking.","The user has a dog named Rex."],"reason":"two facts"}}]}}

INPUT: {{"entries":[{{"id":"O1","text":"The user likes tea.","score":0.5}},{{"id":"O2","text":"The user likes green tea in the morning.","score":1.5}}]}}
OUTPUT: {{"actions":[{{"action":"modify","source_ids":["O1"],"texts":["The user likes tea, green tea in the morning most."],"reason":"more precise"}}]}}

INPUT: {{"entries":[{{"id":"O1","text":"The user has a cat.","score":1.0}},{{"id":"O2","text":"The user has a dog.","score":1.0}}]}}
OUTPUT: {{"actions":[]}}

INPUT: {{"entries":[{{"id":"O1","text":"The user said something.","score":0.0}},{{"id":"O2","text":"The user plays chess.","score":0.8}}]}}
OUTPUT: {{"actions":[{{"action":"discard","source_ids":["O1"],"texts":[],"reason":"says nothing"}}]}}

{JSON_RULE}"""


class EntryRef(WireIn):
    id: str
    text: str
    score: float


class Input(WireIn):
    entries: list[EntryRef]


class Action(Wire):
    action: RefineKind
    source_ids: list[ObsAlias] = Field(max_length=MAX_ENTRIES)
    texts: list[Text] = Field(max_length=MAX_PIECES)
    reason: str = Field(max_length=MAX_REASON)


class Output(Wire):
    actions: list[Action] = Field(max_length=MAX_ACTIONS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(entries: Sequence[Observation]) -> Call:
    inputs = (entries,)
    entries = unique(entries)
    ids = Aliases("O", [e.id for e in entries])
    payload = Input(entries=[EntryRef(id=ids.alias(e.id), text=e.text, score=round(e.score or 0.0, 2))
                             for e in entries])

    def read(out: Output, reader: Reader) -> list[RefineAction]:
        actions = []
        for a in out.actions:
            sources = real_ids(reader, ids, list(a.source_ids))
            if sources:  # an action on nothing the call offered is dropped; the scope checks the rest
                actions.append(RefineAction(action=a.action, source_ids=sources,
                                            texts=[t.strip() for t in a.texts], reason=a.reason.strip()))
        return actions

    return Call(payload, {"O": ids.names}, read, {"actions": max(len(ids.names), 1)},
                inputs=inputs, empty=[] if len(entries) < 2 else None)


# -- the task ---------------------------------------------------------------------------------------

class RefinePayload(TaskPayload):
    entries: list[Observation]  # one cluster; its hash and member versions ride along for the handler


class RefineOutput(TaskOutput):
    actions: list[RefineAction]


async def _run(backend, prompt, p: RefinePayload, rank) -> RefineOutput:
    return RefineOutput(actions=await backend.ask(prompt, p.entries))


TASK = Task(TaskName.REFINE, RefinePayload, _run, RefineOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(entries: Sequence[Observation]) -> list[RefineAction]:
    actions = [a.model_dump() for a in refine.refine(entries)]
    return [RefineAction.model_validate(a) for a in fit_answer(Output, {"actions": actions})["actions"]]
