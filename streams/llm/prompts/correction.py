"""Correction work: a new statement came up on the topic of an existing entry; merge, keep the new, keep
the old, or keep both (the origin's PERSONA_CORRECTION_PROMPT, in our words; docs/corrections.md)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import CorrectionAction, CorrectionDecision, CorrectionItem
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
)
from credence.streams.llm.rules import correction_work
from credence.streams.scope.tasks import TaskName

NAME = "correction"
VERSION = 1
MAX_TOKENS = 1024
MAX_ITEMS = 10  # one call decides at most this many queued corrections (the origin's batch limit)

SYSTEM = f"""Each pair holds a memory entry about the user (old, with its evidence score: higher = more
often confirmed by the user) and a newer statement on the same topic (new, with its score). Decide each
pair:
- "keep_new": the new statement replaces the old one: the user changed, moved, quit, renamed or
  corrected it ("lives in Berlin" -> "lives in Lisbon"; "loves coffee" -> "no longer drinks coffee").
- "merge": both are true and say more together; text is one sentence saying both.
- "keep_old": the new statement is wrong or says less and the old one stands.
- "keep_both": a similar topic but no contradiction ("loves coffee" and "loves green tea").
A value that can hold only once (where the user lives, their job, a pet's name) replaced by another is
"keep_new". Give one decision per pair; text is "" unless the action is "merge".
{DATA_RULE}

Examples:
INPUT: {{"pairs":[{{"id":"C1","old":"The user lives in Berlin.","old_score":2.5,"new":"The user lives in Lisbon.","new_score":2.1}},{{"id":"C2","old":"The user loves coffee.","old_score":1.0,"new":"The user loves green tea.","new_score":2.0}}]}}
OUTPUT: {{"decisions":[{{"id":"C1","action":"keep_new","text":""}},{{"id":"C2","action":"keep_both","text":""}}]}}

INPUT: {{"pairs":[{{"id":"C1","old":"The user enjoys hiking.","old_score":1.5,"new":"The user hikes in the Alps every summer.","new_score":2.0}},{{"id":"C2","old":"Der Nutzer hat eine Katze namens Mitten.","old_score":2.0,"new":"The user's cat is named Miso, not Mitten.","new_score":2.2}}]}}
OUTPUT: {{"decisions":[{{"id":"C1","action":"merge","text":"The user enjoys hiking, in the Alps every summer."}},{{"id":"C2","action":"keep_new","text":""}}]}}

INPUT: {{"pairs":[{{"id":"C1","old":"The user lives in Berlin with their husband.","old_score":3.0,"new":"The user lives in Berlin.","new_score":2.0}},{{"id":"C2","old":"El usuario tiene un gato llamado Mitten.","old_score":1.5,"new":"The user has a dog named Rex.","new_score":2.0}}]}}
OUTPUT: {{"decisions":[{{"id":"C1","action":"keep_old","text":""}},{{"id":"C2","action":"keep_both","text":""}}]}}

{JSON_RULE}"""


class Pair(WireIn):
    id: str
    old: str
    old_score: float
    new: str
    new_score: float


class Input(WireIn):
    pairs: list[Pair]


class Decision(Wire):
    id: alias_field("C")  # type: ignore[valid-type]
    action: CorrectionAction
    text: Text


class Output(Wire):
    decisions: list[Decision] = Field(max_length=MAX_ITEMS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def _score(value: float | None) -> float:
    return round(value, 2) if value is not None else 0.0


def build(items: Sequence[CorrectionItem]) -> Call:
    inputs = (items,)
    items = list({i.id: i for i in items}.values())[:MAX_ITEMS]
    ids = Aliases("C", [i.id for i in items])
    payload = Input(pairs=[Pair(id=ids.alias(i.id), old=i.old.text, old_score=_score(i.old.score), new=i.new_text,
                                new_score=_score(i.new_score)) for i in items])

    def read(out: Output, reader: Reader) -> list[CorrectionDecision]:
        given: dict[str, CorrectionDecision] = {}
        for d in out.decisions:
            real = reader.real(ids, d.id)
            if real is not None and real not in given:
                given[real] = CorrectionDecision(id=real, action=d.action, text=d.text.strip())
        # A pair the model left out stays queued (the scope asks again), never decided by default here.
        return [given[i.id] for i in items if i.id in given]

    return Call(payload, {"C": ids.names}, read, {"decisions": len(ids.names)},
                inputs=inputs, empty=[] if not items else None)


# -- the task ---------------------------------------------------------------------------------------

class CorrectionPayload(TaskPayload):
    corrections: list[CorrectionItem]


class CorrectionOutput(TaskOutput):
    decisions: list[CorrectionDecision]


async def _run(backend, prompt, p: CorrectionPayload, rank) -> CorrectionOutput:
    return CorrectionOutput(decisions=await backend.ask(prompt, p.corrections))


TASK = Task(TaskName.CORRECTION, CorrectionPayload, _run, CorrectionOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(items: Sequence[CorrectionItem]) -> list[CorrectionDecision]:
    items = list(items)[:MAX_ITEMS]  # the call's bound, as on the wire
    said = [d.model_dump() for d in correction_work.correct(items)]
    return [CorrectionDecision.model_validate(d) for d in fit_answer(Output, {"decisions": said})["decisions"]]
