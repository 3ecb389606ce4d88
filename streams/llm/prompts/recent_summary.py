"""Recent conversation: the older turns and the previous memo rewritten into one rolling memo (the origin's
recent compression: concise, corrections kept as "originally X, later Y", the user's
objections word for word)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from credence.streams.llm.aliases import Reader
from credence.streams.llm.models import Turn
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    Task,
    TaskOutput,
    TaskPayload,
    Wire,
    WireIn,
    fit_answer,
    render_json,
)
from credence.streams.llm.rules import summary
from credence.streams.scope.tasks import TaskName

NAME = "recent_summary"
VERSION = 1
MAX_TOKENS = 1100  # the origin's cap on a summary call's output (RECENT_SUMMARY_MAX_TOKENS + 10%)
MAX_SUMMARY_CHARS = 4400  # ~1,100 tokens of text
MAX_TURNS = 80

SYSTEM = f"""You keep the memo of a conversation between a user and an AI character. memo is the memo so
far (may be empty); turns are the older turns that now leave the verbatim history, oldest first. Write
the new memo: one short paragraph or a few lines that replace memo and turns together.

Rules:
- Keep what matters for going on with the conversation: what the user said about themselves, their
  plans, requests and open questions, and what the character promised or asked.
- Write in the third person ("The user …", "The character …"), in the language of the turns.
- When the user corrected something, keep both: "originally X, later corrected to Y".
- Keep the user's objections or negative feedback word for word, in quotes.
- Drop greetings, small talk and repetition. Never invent anything that is not in memo or turns.
- Nothing worth keeping and no memo: an empty summary.
- At most max_tokens tokens.
{DATA_RULE}

Examples:
INPUT: {{"memo":"","max_tokens":200,"turns":[{{"role":"user","text":"hi!"}},{{"role":"ai","text":"Hello! How was your weekend?"}},{{"role":"user","text":"Good, I started learning the cello on Saturday."}},{{"role":"ai","text":"Wonderful! Do you have a teacher?"}},{{"role":"user","text":"Yes, her name is Ana. Actually no, it's Anna with two n."}}]}}
OUTPUT: {{"summary":"The user started learning the cello on Saturday with a teacher, originally called Ana, later corrected to Anna."}}

INPUT: {{"memo":"The user is planning a trip to Lisbon in May.","max_tokens":200,"turns":[{{"role":"ai","text":"Shall I suggest some museums in Lisbon?"}},{{"role":"user","text":"No, stop suggesting museums, I hate them."}},{{"role":"user","text":"I booked the flight for May 3rd."}}]}}
OUTPUT: {{"summary":"The user is planning a trip to Lisbon in May and booked the flight for May 3rd. Asked about museums, the user said: \\"No, stop suggesting museums, I hate them.\\""}}

INPUT: {{"memo":"","max_tokens":200,"turns":[{{"role":"user","text":"Ich habe morgen eine Prüfung in Chemie."}},{{"role":"ai","text":"Viel Erfolg! Soll ich dich abfragen?"}},{{"role":"user","text":"Ja, bitte."}}]}}
OUTPUT: {{"summary":"Der Nutzer hat morgen eine Chemieprüfung; der Charakter bot an, ihn abzufragen, und der Nutzer nahm an."}}

INPUT: {{"memo":"","max_tokens":200,"turns":[{{"role":"user","text":"hola"}},{{"role":"ai","text":"¡Hola! ¿Qué tal?"}},{{"role":"user","text":"bien, gracias"}}]}}
OUTPUT: {{"summary":""}}

{JSON_RULE}"""


class TurnRef(WireIn):
    role: str
    text: str


class Input(WireIn):
    memo: str
    max_tokens: int
    turns: list[TurnRef]


class Output(Wire):
    summary: Annotated[str, Field(max_length=MAX_SUMMARY_CHARS)]


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(memo: str, turns: Sequence[Turn], max_tokens: int) -> Call:
    inputs = (memo, turns, max_tokens)
    payload = Input(memo=memo, max_tokens=max_tokens,
                    turns=[TurnRef(role=t.role, text=t.text) for t in list(turns)[-MAX_TURNS:]])

    def read(out: Output, reader: Reader) -> str:
        return out.summary

    return Call(payload, {}, read, inputs=inputs)


# -- the task: the recent conversation's memo ----------------------------------------------------------

class SummarisePayload(TaskPayload):
    memo: str = ""
    turns: list[Turn]
    max_tokens: int


class SummariseOutput(TaskOutput):
    summary: str


async def _run(backend, prompt, p: SummarisePayload, rank) -> SummariseOutput:
    return SummariseOutput(summary=await backend.ask(prompt, p.memo, p.turns, p.max_tokens))


TASK = Task(TaskName.SUMMARISE, SummarisePayload, _run, SummariseOutput)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(memo: str, turns: Sequence[Turn], max_tokens: int) -> str:
    return fit_answer(Output, {"summary": summary.summarise(memo, turns, max_tokens)})["summary"]
