"""Post-turn check: did the user's reply confirm, deny or ignore each surfaced reflection?"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Feedback, FeedbackDecision, Observation
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    ObsAlias,
    Task,
    TaskOutput,
    TaskPayload,
    Wire,
    WireIn,
    fit_answer,
    render_json,
    unique,
)
from credence.streams.llm.rules import feedback
from credence.streams.scope.tasks import TaskName

NAME = "surfaced_feedback"
VERSION = 2
MAX_TOKENS = 256
MAX_DECISIONS = 20
MAX_AI_CHARS = 1500

SYSTEM = f"""The AI character's last turn (ai_turn) mentioned some observations about the user
("surfaced"), and the user replied (reply). For each surfaced observation decide what the reply does
to it:
- "confirm": the reply says it is true ("yes", "exactly", "ja, stimmt", "sí, claro", or restating it).
- "deny": the reply says it is wrong or no longer true ("no", "not anymore", "nein", "ya no").
- "ignore": the reply does not address it. Laughter alone ("haha", "lol"), thanks, or a new topic is
  "ignore".
A bare "yes" or "no" answers what ai_turn asked: apply it to the observation the question was about
and "ignore" the others. A reply naming one observation leaves the others "ignore".
Give one decision per surfaced observation.
{DATA_RULE}

Examples:
INPUT: {{"ai_turn":"You still go hiking every weekend, right? Say hi to your dog!","reply":"Yes, every Saturday.","surfaced":[{{"id":"O1","text":"The user hikes on weekends.","subject":"hiking"}},{{"id":"O2","text":"The user has a dog.","subject":"dog"}}]}}
OUTPUT: {{"decisions":[{{"id":"O1","decision":"confirm"}},{{"id":"O2","decision":"ignore"}}]}}

INPUT: {{"ai_turn":"Wie wäre es mit einem Kaffee? Du liebst doch Kaffee.","reply":"Nein, ich trinke keinen Kaffee mehr.","surfaced":[{{"id":"O1","text":"The user loves coffee.","subject":"coffee"}}]}}
OUTPUT: {{"decisions":[{{"id":"O1","decision":"deny"}}]}}

INPUT: {{"ai_turn":"As a teacher you must be tired after class.","reply":"haha what's the weather like tomorrow?","surfaced":[{{"id":"O1","text":"The user works as a teacher.","subject":"occupation"}}]}}
OUTPUT: {{"decisions":[{{"id":"O1","decision":"ignore"}}]}}

INPUT: {{"ai_turn":"¿Sigues aprendiendo alemán y tocando la guitarra?","reply":"La guitarra ya no, pero el alemán sí.","surfaced":[{{"id":"O1","text":"The user is learning German.","subject":"german"}},{{"id":"O2","text":"The user plays guitar.","subject":"guitar"}}]}}
OUTPUT: {{"decisions":[{{"id":"O1","decision":"confirm"}},{{"id":"O2","decision":"deny"}}]}}

{JSON_RULE}"""


class SurfacedRef(WireIn):
    id: str
    text: str
    subject: str = ""


class Input(WireIn):
    ai_turn: str
    reply: str
    surfaced: list[SurfacedRef]


class Decision(Wire):
    id: ObsAlias
    decision: Feedback


class Output(Wire):
    decisions: list[Decision] = Field(max_length=MAX_DECISIONS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(reply_text: str, surfaced: Sequence[Observation], ai_text: str = "") -> Call:
    inputs = (reply_text, surfaced, ai_text)
    ids = Aliases("O", [o.id for o in surfaced])
    payload = Input(ai_turn=ai_text[-MAX_AI_CHARS:], reply=reply_text,
                    surfaced=[SurfacedRef(id=ids.alias(o.id), text=o.text, subject=o.subject) for o in unique(surfaced)])

    def read(out: Output, reader: Reader) -> list[FeedbackDecision]:
        given: dict[str, str] = {}
        for d in out.decisions:
            real = reader.real(ids, d.id)
            if real is not None:
                given.setdefault(real, d.decision)
        # A surfaced reflection the model left out was not addressed by the reply.
        return [FeedbackDecision(id=o.id, decision=given.get(o.id, "ignore")) for o in surfaced]  # type: ignore[arg-type]

    return Call(payload, {"O": ids.names}, read, {"decisions": min(len(ids.names), MAX_DECISIONS)},
                inputs=inputs, empty=[] if not surfaced else None)


# -- the task ---------------------------------------------------------------------------------------

class FeedbackPayload(TaskPayload):
    reply_text: str
    surfaced: list[Observation]
    ai_text: str = ""


class FeedbackOutput(TaskOutput):
    decisions: list[FeedbackDecision]


async def _run(backend, prompt, p: FeedbackPayload, rank) -> FeedbackOutput:
    return FeedbackOutput(decisions=await backend.ask(prompt, p.reply_text, p.surfaced, p.ai_text))


TASK = Task(TaskName.FEEDBACK, FeedbackPayload, _run, FeedbackOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(reply_text: str, surfaced: Sequence[Observation], ai_text: str = "") -> list[FeedbackDecision]:
    decisions = feedback.check_feedback(reply_text, surfaced)
    said = fit_answer(Output, {"decisions": [d.model_dump() for d in decisions]})["decisions"]
    # As the wire path's reader does: a reflection left out of the bounded answer was not addressed.
    return [*(FeedbackDecision.model_validate(d) for d in said),
            *(FeedbackDecision(id=d.id, decision="ignore") for d in decisions[len(said):])]
