"""Post-turn check: did the user's reply confirm, deny or ignore each surfaced reflection?"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from credence.streams.llm.models import Feedback, Observation
from credence.streams.llm.prompts.base import Wire, render_json

NAME = "surfaced_feedback"
VERSION = 1
MAX_TOKENS = 512

SYSTEM = """The AI character just mentioned some observations about the user ("surfaced"), and the
user replied. For each surfaced observation decide what the reply does to it:
- "confirm": the user agrees it is true (yes, right, exactly, that's true).
- "deny": the user says it is wrong (no, not really, wrong, that's not true).
- "ignore": the reply does not address it.

Give exactly one decision per surfaced observation, copying its id exactly from the input.
Answer with JSON that matches the given schema and nothing else."""


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    reply_text: str
    surfaced: list[Observation]


class Decision(Wire):
    id: str
    decision: Feedback


class Output(Wire):
    decisions: list[Decision]


def render_user(payload: Input) -> str:
    return render_json(payload)
