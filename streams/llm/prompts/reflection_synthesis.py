"""Reflection synthesis: turn facts into short observations about the user, with their sources."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from credence.streams.llm.models import Fact
from credence.streams.llm.prompts.base import Wire, render_json

NAME = "reflection_synthesis"
VERSION = 1
MAX_TOKENS = 1024

SYSTEM = """You write reflections: short, durable observations about a user, synthesised from facts
the user stated.

- Group facts about the same subject into one reflection; when facts disagree, the most recent one
  (last in the input) wins.
- text: one third-person sentence ("The user likes coffee.").
- subject: the lowercase key phrase the reflection is about.
- source_fact_ids: the ids of every fact the reflection rests on, copied exactly from the input.
Answer with JSON that matches the given schema and nothing else."""


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    facts: list[Fact]


class Draft(Wire):
    text: str
    subject: str
    source_fact_ids: list[str]


class Output(Wire):
    reflections: list[Draft]


def render_user(payload: Input) -> str:
    return render_json(payload)
