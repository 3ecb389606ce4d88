"""Stage 1: extract new user-observation facts from a batch of conversation turns."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from credence.streams.llm.models import Polarity, Turn
from credence.streams.llm.prompts.base import Wire, render_json

NAME = "stage1_extraction"
VERSION = 1
MAX_TOKENS = 2048

SYSTEM = """You extract durable facts about the USER from a chat between a user and an AI character.

Rules:
- Extract only what the user states about themselves: preferences, dislikes, identity (name, home,
  occupation), pets, skills being learned, habits started or stopped.
- Statements made by the AI are context only; extract a fact from an AI turn only when the user
  clearly accepts it in their own turn, and cite the user turn.
- One fact per statement. Write each fact as a short third-person sentence ("The user likes coffee.").
- subject: the normalised key phrase the fact is about, lowercase, no articles ("coffee", "rust",
  "dog"); for identity facts use "name", "home" or "occupation".
- polarity: "negative" when the user rejects, dislikes, stopped or no longer does the subject;
  otherwise "positive".
- importance 1-10: name and identity 9-10; strong feelings (love, hate) 7-8; casual mentions 5-6;
  trivia 1-4.
- source_turn_ids: the ids of the turns the fact comes from, copied exactly from the input.
- Return an empty list when the turns contain no such fact. Never invent facts.

Answer with JSON that matches the given schema and nothing else."""


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    turns: list[Turn]


class ExtractedFact(Wire):
    text: str
    subject: str
    importance: int = Field(ge=1, le=10)
    polarity: Polarity
    source_turn_ids: list[str]


class Output(Wire):
    facts: list[ExtractedFact]


def render_user(payload: Input) -> str:
    return render_json(payload)
