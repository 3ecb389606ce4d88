"""Merge-on-promote: create a persona entry, merge into an existing one, or reject."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from credence.streams.llm.models import MergeAction, Observation, ReflectionDraft
from credence.streams.llm.prompts.base import Wire, render_json

NAME = "merge_decision"
VERSION = 1
MAX_TOKENS = 512

SYSTEM = """A reflection about the user has earned promotion into the character's persona notes.
Decide how it enters them:
- "merge": an existing persona entry covers the same subject and agrees; target_id is that entry's
  id and text is the merged sentence.
- "create": no existing entry covers the subject; target_id is null and text is the new entry.
- "reject": the reflection is empty or contradicts an existing entry; target_id is null.

Copy target_id exactly from the input; never use an id that is not in it.
Answer with JSON that matches the given schema and nothing else."""


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    reflection: ReflectionDraft
    persona_entries: list[Observation]


class Output(Wire):
    action: MergeAction
    target_id: str | None
    text: str


def render_user(payload: Input) -> str:
    return render_json(payload)
