"""Negative-keyword hook: which observation, if any, does the user's rebuttal or forget request target?"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Observation, RebuttalTarget
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
from credence.streams.llm.prompts.surfaced_feedback import MAX_AI_CHARS, SurfacedRef
from credence.streams.llm.rules import feedback, matching
from credence.streams.scope.tasks import TaskName

NAME = "negative_keyword_target"
VERSION = 3
MAX_TOKENS = 128
MAX_TARGETS = 20
MAX_MESSAGES = 3

SYSTEM = f"""The user's latest message (the last of user_messages) contains a rebuttal word ("no",
"wrong", "not true", "nein", "falsch", "no es verdad", …) or asks to forget something ("forget what
I told you about …", "don't remember that", "vergiss das", "olvida eso"). The AI character's previous
turn is ai_turn; observations are what is remembered about the user. Decide which observations, if
any, the latest message says are wrong about the user or asks to have forgotten.

Return the ids of the targeted observations, only ones the user's messages speak about (by name or as
the thing ai_turn just said). Set "forget" to true when the user asks to forget them or stop
remembering them (not when they only say it is wrong; "don't forget …" is not a forget request).
Return {{"target_ids": [], "forget": false}} when the message is aimed at something else: the weather,
a story or game, another person, the AI's own opinion, or a plain "no" to an offer or question that
is not about these observations.
{DATA_RULE}

Examples:
INPUT: {{"ai_turn":"Since you love coffee, try this new café!","user_messages":["That's wrong, I never liked coffee."],"observations":[{{"id":"O1","text":"The user loves coffee.","subject":"coffee"}},{{"id":"O2","text":"The user has a dog.","subject":"dog"}}]}}
OUTPUT: {{"target_ids":["O1"],"forget":false}}

INPUT: {{"ai_turn":"Want me to tell you another story?","user_messages":["no thanks, I'm tired"],"observations":[{{"id":"O1","text":"The user likes fantasy stories.","subject":"fantasy stories"}}]}}
OUTPUT: {{"target_ids":[],"forget":false}}

INPUT: {{"ai_turn":"Dein Hund Bello wartet sicher schon.","user_messages":["Falsch, ich habe eine Katze, keinen Hund."],"observations":[{{"id":"O1","text":"The user has a dog named Bello.","subject":"dog"}},{{"id":"O2","text":"The user lives in Hamburg.","subject":"home"}}]}}
OUTPUT: {{"target_ids":["O1"],"forget":false}}

INPUT: {{"ai_turn":"Creo que va a llover mañana.","user_messages":["No, el pronóstico dice sol."],"observations":[{{"id":"O1","text":"The user likes hiking.","subject":"hiking"}}]}}
OUTPUT: {{"target_ids":[],"forget":false}}

INPUT: {{"ai_turn":"Good night!","user_messages":["Please forget what I told you about my dog Rex."],"observations":[{{"id":"O1","text":"The user has a dog named Rex.","subject":"dog"}},{{"id":"O2","text":"The user likes tea.","subject":"tea"}}]}}
OUTPUT: {{"target_ids":["O1"],"forget":true}}

{JSON_RULE}"""


class Input(WireIn):
    ai_turn: str
    user_messages: list[str]
    observations: list[SurfacedRef]


class Output(Wire):
    target_ids: list[ObsAlias] = Field(max_length=MAX_TARGETS)
    forget: bool


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(last_user_messages: Sequence[str], observations: Sequence[Observation], ai_text: str = "") -> Call:
    inputs = (last_user_messages, observations, ai_text)
    ids = Aliases("O", [o.id for o in observations])
    payload = Input(ai_turn=ai_text[-MAX_AI_CHARS:], user_messages=list(last_user_messages[-MAX_MESSAGES:]),
                    observations=[SurfacedRef(id=ids.alias(o.id), text=o.text, subject=o.subject)
                                  for o in unique(observations)])

    def read(out: Output, reader: Reader) -> RebuttalTarget:
        found = (reader.real(ids, a) for a in dict.fromkeys(out.target_ids))
        return RebuttalTarget(ids=[r for r in found if r is not None], forget=out.forget)

    return Call(payload, {"O": ids.names}, read, {"target_ids": min(len(ids.names), MAX_TARGETS)},
                inputs=inputs, empty=RebuttalTarget(ids=[]) if not observations else None)


# -- the task ---------------------------------------------------------------------------------------

class TargetPayload(TaskPayload):
    messages: list[str]
    observations: list[Observation]
    ai_text: str = ""


class TargetOutput(TaskOutput):
    ids: list[str]
    forget: bool = False  # the user asked to forget the targets (older answers lack it: a rebuttal)


async def _run(backend, prompt, p: TargetPayload, rank) -> TargetOutput:
    answer = await backend.ask(prompt, p.messages, p.observations, p.ai_text)
    return TargetOutput(ids=list(answer.ids), forget=answer.forget)


TASK = Task(TaskName.TARGET, TargetPayload, _run, TargetOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(last_user_messages: Sequence[str], observations: Sequence[Observation],
                 ai_text: str = "") -> RebuttalTarget:
    ids = matching.target_check(last_user_messages[-MAX_MESSAGES:], observations, ai_text)
    forget = feedback.asks_to_forget(last_user_messages[-1]) if last_user_messages else False
    wired = fit_answer(Output, {"target_ids": ids, "forget": forget})
    return RebuttalTarget(ids=wired["target_ids"], forget=wired["forget"])
