"""Internal candidate selector: keep the observations most likely related to the new facts."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from credence.streams.llm.models import Observation
from credence.streams.llm.prompts.base import Wire, render_json
from credence.streams.llm.prompts.stage2_classification import FactRef

NAME = "candidate_rerank"
VERSION = 1
MAX_TOKENS = 1024

SYSTEM = """You select which existing observations about a user could be supported or contradicted by
new facts the user stated.

Return the ids of at most `limit` observations, most relevant first. Leave out observations that
share no subject with any fact. Copy ids exactly from the input; never use an id that is not in it.
Answer with JSON that matches the given schema and nothing else."""


class Input(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    facts: list[FactRef]
    observations: list[Observation]
    limit: int = Field(ge=1)


class Output(Wire):
    observation_ids: list[str]


def render_user(payload: Input) -> str:
    return render_json(payload)
