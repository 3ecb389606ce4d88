"""Stage 2: does each new fact reinforce or negate a selected observation?"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from credence.streams.llm.models import Fact, Observation, Polarity, Relation
from credence.streams.llm.prompts.base import Wire, render_json

NAME = "stage2_classification"
VERSION = 1
MAX_TOKENS = 2048

SYSTEM = """You compare new facts a user stated with existing observations about that user.

For every pair of (fact, observation) decide:
- "reinforce": the fact supports the observation (same subject, same direction).
- "negate": the fact contradicts the observation (same subject, opposite direction, or a different
  value for something that has only one value, such as the user's name, home or occupation).
- Unrelated pairs are omitted. Most pairs are unrelated; do not guess.

Copy fact_id and observation_id exactly from the input; never use an id that is not in the input.
Answer with JSON that matches the given schema and nothing else."""


class FactRef(BaseModel):
    """What Stage 2 needs of a fact; subject and polarity spare the model re-deriving them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    text: str
    subject: str
    polarity: Polarity


def fact_refs(facts: Sequence[Fact]) -> list[FactRef]:
    return [FactRef(id=f.id, text=f.text, subject=f.subject, polarity=f.polarity) for f in facts]


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    facts: list[FactRef]
    observations: list[Observation]


class Pair(Wire):
    fact_id: str
    observation_id: str
    relation: Relation


class Output(Wire):
    classifications: list[Pair]


def render_user(payload: Input) -> str:
    return render_json(payload)
