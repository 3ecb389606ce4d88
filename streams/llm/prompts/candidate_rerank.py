"""Internal candidate selector: keep the observations most likely related to the new facts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Fact, Observation
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    ObsAlias,
    Wire,
    WireIn,
    fit_answer,
    render_json,
    unique,
)
from credence.streams.llm.prompts.stage2_classification import FactRef, ObservationRef, fact_refs, observation_refs
from credence.streams.llm.rules import matching

if TYPE_CHECKING:
    from credence.streams.llm.token_budget import Budget

NAME = "candidate_rerank"
VERSION = 3
MAX_TOKENS = 256
MAX_IDS = 50

SYSTEM = f"""You select which existing observations about a user could be supported or contradicted by
new facts the user stated.

Return the ids of at most `limit` observations, most relevant first. Keep only observations about the
same subject as some fact (in any language); leave out the rest, even if that leaves fewer than
`limit` or none.
{DATA_RULE}

Examples:
INPUT: {{"facts":[{{"id":"F1","text":"The user hates tea.","subject":"tea","polarity":"negative"}}],"observations":[{{"id":"O1","text":"The user has a dog.","subject":"dog"}},{{"id":"O2","text":"Der Nutzer trinkt gern Tee.","subject":"tea"}}],"limit":1}}
OUTPUT: {{"observation_ids":["O2"]}}

INPUT: {{"facts":[{{"id":"F1","text":"The user likes jazz.","subject":"jazz","polarity":"positive"}}],"observations":[{{"id":"O1","text":"The user has a dog.","subject":"dog"}}],"limit":2}}
OUTPUT: {{"observation_ids":[]}}

INPUT: {{"facts":[{{"id":"F1","text":"The user moved to Lisbon.","subject":"home","polarity":"positive"}},{{"id":"F2","text":"The user no longer eats cheese.","subject":"cheese","polarity":"negative"}}],"observations":[{{"id":"O1","text":"The user likes hiking.","subject":"hiking"}},{{"id":"O2","text":"The user lives in Berlin.","subject":"home"}},{{"id":"O3","text":"Al usuario le encanta el queso.","subject":"cheese"}}],"limit":3}}
OUTPUT: {{"observation_ids":["O2","O3"]}}

INPUT: {{"facts":[{{"id":"F1","text":"Mi nombre es Lucía.","subject":"name","polarity":"positive"}}],"observations":[{{"id":"O1","text":"The user's best friend is called Lucía.","subject":"best friend"}},{{"id":"O2","text":"The user's name is Lucy.","subject":"name"}}],"limit":1}}
OUTPUT: {{"observation_ids":["O2"]}}

{JSON_RULE}"""


class Input(WireIn):
    facts: list[FactRef]
    observations: list[ObservationRef]
    limit: int = Field(ge=1)


class Output(Wire):
    observation_ids: list[ObsAlias] = Field(max_length=MAX_IDS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(facts: Sequence[Fact], observations: Sequence[Observation], limit: int, fit: Budget | None = None) -> Call:
    """fit: the caps the candidates are cut to first (a task's call; the token budget renders without)."""
    if limit < 1:  # no Input holds it: nothing to render, nothing to ask
        return Call(None, {}, lambda out, reader: [], inputs=(facts, observations, limit), empty=[])
    if fit is not None and facts and observations:
        observations = fit.rerank(facts, observations, limit)
    inputs = (facts, observations, limit)
    facts, observations = unique(facts), unique(observations)
    f_ids = Aliases("F", [f.id for f in facts])
    o_ids = Aliases("O", [o.id for o in observations])
    payload = Input(facts=fact_refs(facts, f_ids), observations=observation_refs(observations, o_ids), limit=limit)

    def read(out: Output, reader: Reader) -> list[str]:
        found = (reader.real(o_ids, a) for a in dict.fromkeys(out.observation_ids))
        return [r for r in found if r is not None][:limit]

    return Call(payload, {"O": o_ids.names}, read, {"observation_ids": min(limit, MAX_IDS)},
                inputs=inputs, empty=[] if not facts or not observations else None)


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[str]:
    return fit_answer(Output, {"observation_ids": matching.rerank(facts, observations, limit)})["observation_ids"]
