"""Stage 1: extract new user-observation facts from a batch of conversation turns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Fact, Polarity, Turn
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    Subject,
    Task,
    TaskOutput,
    TaskPayload,
    Text,
    TurnAlias,
    Wire,
    WireIn,
    fit_answer,
    real_ids,
    render_json,
    unique,
)
from credence.streams.llm.rules import extraction
from credence.streams.scope.tasks import TaskName
from credence.tables.origin import fact_id

NAME = "stage1_extraction"
VERSION = 4
MAX_TOKENS = 2048
MAX_FACTS = 20
MAX_TURN_CHARS = 2000  # a pasted essay is not a statement about the user; its head is enough

SYSTEM = f"""You extract durable facts about the USER from a chat between the user and an AI character.

Rules:
- Extract only what the user states about themselves: likes and dislikes, identity (name, home,
  occupation), pets, skills being learned, habits started or stopped.
- AI turns are context only. Use an AI turn only when the user's own next turn clearly accepts it
  ("yes, exactly"), and cite both turns. Laughing ("haha", "lol"), "maybe" or a change of topic is
  not acceptance.
- Role-play, hypotheticals, jokes, sarcasm and fiction are not facts: "as a pirate I love rum",
  "if I were rich I'd buy a boat", "I'm a potato lol" give nothing.
- Other people are not the user: "my sister loves cats" says nothing about what the user likes.
- The user may write in any language. text: one short third-person sentence in the user's language
  ("The user likes coffee.", "Der Nutzer mag Kaffee."). subject: a lowercase ENGLISH key phrase, no
  articles ("coffee", "rust", "dog"); for identity use "name", "home" or "occupation".
- polarity: "negative" when the user rejects, dislikes, stopped or no longer does the subject;
  otherwise "positive".
- importance 1-10: 10 ONLY when the user explicitly asks to remember it ("remember this", "merk dir
  das", "no lo olvides"); name and identity 8-9; strong feelings (love, hate) 7-8; casual mentions
  5-6; trivia 1-4.
- source_turn_ids: the ids of the turns the fact comes from.
- text must read alone, months later, to someone who never saw the chat: name the thing instead of
  "it", "them", "this", "that", "there" or "here"; the user's own things are "their ..." ("my dogs" ->
  "their dogs"); never first person (I, me, my, we, our); nothing about the AI character or "you"; one
  complete sentence, never cut off mid-clause (no dash, "and" or "because" at the end). A demonstrative
  gets its name ("this park" -> "Griffith Park" when the turns name it); other people get their name or
  relation, never a bare "him"/"her" ("making him happy" -> "making their brother happy"); the object
  says something ("enjoys what they do" -> "enjoys working as a nurse"). Leave a fact out when the turns
  do not say what a pronoun or a "this/that ..." means or when it is about the AI.
- One fact per statement; never invent facts. Return {{"facts": []}} when there is none.
{DATA_RULE}

Examples:
INPUT: {{"turns":[{{"id":"T1","role":"user","text":"I've been learning Rust since May, and I hate Mondays."}}]}}
OUTPUT: {{"facts":[{{"text":"The user is learning Rust.","subject":"rust","importance":6,"polarity":"positive","source_turn_ids":["T1"]}},{{"text":"The user hates Mondays.","subject":"mondays","importance":7,"polarity":"negative","source_turn_ids":["T1"]}}]}}

INPUT: {{"turns":[{{"id":"T1","role":"ai","text":"You must love sushi!"}},{{"id":"T2","role":"user","text":"haha, if I were a cat I would"}}]}}
OUTPUT: {{"facts":[]}}

INPUT: {{"turns":[{{"id":"T1","role":"ai","text":"Du wohnst doch in Hamburg, oder?"}},{{"id":"T2","role":"user","text":"Ja, genau. Meine Schwester liebt Katzen."}}]}}
OUTPUT: {{"facts":[{{"text":"Der Nutzer wohnt in Hamburg.","subject":"home","importance":8,"polarity":"positive","source_turn_ids":["T1","T2"]}}]}}

INPUT: {{"turns":[{{"id":"T1","role":"user","text":"My dogs are my world. I love them, and I love your stories too! I love it so much."}}]}}
OUTPUT: {{"facts":[{{"text":"The user loves their dogs.","subject":"dogs","importance":8,"polarity":"positive","source_turn_ids":["T1"]}}]}}

INPUT: {{"turns":[{{"id":"T1","role":"user","text":"i love going to Griffith Park near my house - i go to this park every day lol. theres this spot by the water i like"}}]}}
OUTPUT: {{"facts":[{{"text":"The user loves going to Griffith Park near their house.","subject":"griffith park","importance":8,"polarity":"positive","source_turn_ids":["T1"]}},{{"text":"The user goes to Griffith Park every day.","subject":"griffith park","importance":6,"polarity":"positive","source_turn_ids":["T1"]}}]}}

INPUT: {{"turns":[{{"id":"T1","role":"user","text":"Recuerda esto: soy alérgica a los cacahuetes. Ya no como carne."}}]}}
OUTPUT: {{"facts":[{{"text":"La usuaria es alérgica a los cacahuetes.","subject":"peanut allergy","importance":10,"polarity":"positive","source_turn_ids":["T1"]}},{{"text":"La usuaria ya no come carne.","subject":"meat","importance":6,"polarity":"negative","source_turn_ids":["T1"]}}]}}

{JSON_RULE}"""


class TurnRef(WireIn):
    id: str
    role: Literal["user", "ai"]
    text: str


class Input(WireIn):
    turns: list[TurnRef]


class ExtractedFact(Wire):
    text: Text
    subject: Subject
    importance: Literal[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    polarity: Polarity
    source_turn_ids: list[TurnAlias] = Field(min_length=1, max_length=4)


class Output(Wire):
    facts: list[ExtractedFact] = Field(max_length=MAX_FACTS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(turns: Sequence[Turn]) -> Call:
    inputs = (turns,)
    turns = unique(turns)
    ids = Aliases("T", [t.id for t in turns])
    payload = Input(turns=[TurnRef(id=ids.alias(t.id), role=t.role, text=t.text[:MAX_TURN_CHARS]) for t in turns])
    roles = {t.id: t.role for t in turns}

    def read(out: Output, reader: Reader) -> list[Fact]:
        facts: dict[str, Fact] = {}
        for item in out.facts:
            sources = real_ids(reader, ids, list(item.source_turn_ids))
            if not sources:
                reader.drop(item.text, "cites no turn of the input")
                continue
            # Origin comes from the cited turns, not the model's say-so: AI-only facts stay out of Stage 2.
            origin = "user" if any(roles[t] == "user" for t in sources) else "ai"
            subject = item.subject.strip().lower()
            fid = fact_id(sources, subject, item.polarity, item.text)
            facts.setdefault(fid, Fact(id=fid, text=item.text.strip(), subject=subject, importance=item.importance,
                                       polarity=item.polarity, source_turn_ids=sources, origin=origin))
        return list(facts.values())

    return Call(payload, {"T": ids.names}, read, inputs=inputs, empty=[] if not turns else None)


# -- the task ---------------------------------------------------------------------------------------

class Stage1Payload(TaskPayload):
    turns: list[Turn]


class Stage1Output(TaskOutput):
    facts: list[Fact]


async def _run(backend, prompt, p: Stage1Payload, rank) -> Stage1Output:
    return Stage1Output(facts=await backend.ask(prompt, p.turns))


TASK = Task(TaskName.STAGE1, Stage1Payload, _run, Stage1Output)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(turns: Sequence[Turn]) -> list[Fact]:
    out: dict[str, Fact] = {}
    facts = [f.model_dump() for f in extraction.extract_facts(turns)]
    for d in fit_answer(Output, {"facts": facts})["facts"]:
        # The id is the content's, as the wire path's reader derives it from the (cut) text and subject.
        fid = fact_id(d["source_turn_ids"], d["subject"], d["polarity"], d["text"])
        out.setdefault(fid, Fact.model_validate(d | {"id": fid}))
    return list(out.values())
