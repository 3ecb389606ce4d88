"""Negative-keyword hook: which observation, if any, does the user's rebuttal target?"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from credence.streams.llm.models import Observation
from credence.streams.llm.prompts.base import Wire, render_json

NAME = "negative_keyword_target"
VERSION = 1
MAX_TOKENS = 256

SYSTEM = """The user's recent messages contain a rebuttal word (no, wrong, not true, …). Decide which
of the candidate observations about the user, if any, the rebuttal is aimed at.

Return the ids of the targeted observations; return an empty list when the rebuttal is about
something else. Copy ids exactly from the input; never use an id that is not in it.
Answer with JSON that matches the given schema and nothing else."""


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    last_user_messages: list[str]
    observations: list[Observation]


class Output(Wire):
    target_ids: list[str]


def render_user(payload: Input) -> str:
    return render_json(payload)
