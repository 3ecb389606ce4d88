"""Stage 2: does each new fact reinforce or negate a selected observation?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from credence.streams.llm.aliases import Aliases, Reader
from credence.streams.llm.models import Classification, Fact, Observation, Polarity, Relation
from credence.streams.llm.prompts.base import (
    DATA_RULE,
    JSON_RULE,
    Call,
    FactAlias,
    ObsAlias,
    Task,
    TaskOutput,
    TaskPayload,
    Wire,
    WireIn,
    fit_answer,
    render_json,
    unique,
)
from credence.streams.llm.rules import matching
from credence.streams.scope.tasks import TaskName

if TYPE_CHECKING:
    from credence.streams.llm.token_budget import Budget

NAME = "stage2_classification"
VERSION = 2
MAX_TOKENS = 1024
MAX_PAIRS = 60

SYSTEM = f"""You compare new facts a user stated with existing observations about that user.

For a (fact, observation) pair about the SAME subject decide:
- "reinforce": same direction. A negative fact reinforces a negative observation ("hates tea"
  supports "dislikes tea").
- "negate": opposite direction, or a different value for something that has one value at a time
  (the user's name, home, occupation).
Leave out every other pair. A related but different subject is a different subject: "likes green tea
ice cream" is not about "tea", "has a cat" is not about "dog". Most pairs are unrelated; do not guess.
Facts and observations may be in different languages; compare their meaning.
Return {{"classifications": []}} when no pair is about the same subject.
{DATA_RULE}

Examples:
INPUT: {{"facts":[{{"id":"F1","text":"The user hates tea.","subject":"tea","polarity":"negative"}}],"observations":[{{"id":"O1","text":"The user dislikes tea.","subject":"tea"}},{{"id":"O2","text":"The user likes green tea ice cream.","subject":"green tea ice cream"}}]}}
OUTPUT: {{"classifications":[{{"fact_id":"F1","observation_id":"O1","relation":"reinforce"}}]}}

INPUT: {{"facts":[{{"id":"F1","text":"The user lives in Madrid.","subject":"home","polarity":"positive"}},{{"id":"F2","text":"Der Nutzer trinkt keinen Kaffee mehr.","subject":"coffee","polarity":"negative"}}],"observations":[{{"id":"O1","text":"The user lives in Berlin.","subject":"home"}},{{"id":"O2","text":"The user loves coffee.","subject":"coffee"}}]}}
OUTPUT: {{"classifications":[{{"fact_id":"F1","observation_id":"O1","relation":"negate"}},{{"fact_id":"F2","observation_id":"O2","relation":"negate"}}]}}

INPUT: {{"facts":[{{"id":"F1","text":"The user does not eat meat.","subject":"meat","polarity":"negative"}}],"observations":[{{"id":"O1","text":"The user is vegetarian.","subject":"vegetarian diet"}}]}}
OUTPUT: {{"classifications":[{{"fact_id":"F1","observation_id":"O1","relation":"reinforce"}}]}}

INPUT: {{"facts":[{{"id":"F1","text":"The user likes jazz.","subject":"jazz","polarity":"positive"}}],"observations":[{{"id":"O1","text":"The user has a dog.","subject":"dog"}}]}}
OUTPUT: {{"classifications":[]}}

{JSON_RULE}"""


class FactRef(WireIn):
    """What Stage 2 needs of a fact; subject and polarity spare the model re-deriving them."""

    id: str
    text: str
    subject: str
    polarity: Polarity


class ObservationRef(WireIn):
    id: str
    text: str
    subject: str = ""


def fact_refs(facts: Sequence[Fact], ids: Aliases | None = None) -> list[FactRef]:
    return [FactRef(id=ids.alias(f.id) if ids else f.id, text=f.text, subject=f.subject, polarity=f.polarity)
            for f in facts]


def observation_refs(observations: Sequence[Observation], ids: Aliases | None = None) -> list[ObservationRef]:
    # Built again for every candidate list the token budget tries: the fields come from validated
    # Observations (str, str, str), so they are not validated a second time.
    return [ObservationRef.model_construct(id=ids.alias(o.id) if ids else o.id, text=o.text, subject=o.subject)
            for o in observations]


class Input(WireIn):
    facts: list[FactRef]
    observations: list[ObservationRef]


class Pair(Wire):
    fact_id: FactAlias
    observation_id: ObsAlias
    relation: Relation


class Output(Wire):
    classifications: list[Pair] = Field(max_length=MAX_PAIRS)


def render_user(payload: Input) -> str:
    return render_json(payload)


def build(facts: Sequence[Fact], observations: Sequence[Observation], fit: Budget | None = None) -> Call:
    """fit: the Stage-2 caps the observations are cut to first (a task's call); without it they are
    taken as fitted (token_budget.fit_stage2 renders them so)."""
    observations = fit.stage2(facts, observations) if fit is not None else observations
    inputs = (facts, observations)
    facts, observations = unique(facts), unique(observations)
    f_ids = Aliases("F", [f.id for f in facts])
    o_ids = Aliases("O", [o.id for o in observations])
    payload = Input(facts=fact_refs(facts, f_ids), observations=observation_refs(observations, o_ids))

    def read(out: Output, reader: Reader) -> list[Classification]:
        pairs: dict[tuple[str, str], Classification] = {}
        for p in out.classifications:
            fact, obs = reader.real(f_ids, p.fact_id), reader.real(o_ids, p.observation_id)
            if fact is not None and obs is not None:
                pairs.setdefault((fact, obs), Classification(fact_id=fact, observation_id=obs, relation=p.relation))
        return list(pairs.values())

    return Call(payload, {"F": f_ids.names, "O": o_ids.names}, read,
                {"classifications": min(MAX_PAIRS, len(f_ids.names) * len(o_ids.names))},
                inputs=inputs, empty=[] if not facts or not observations else None)


# -- the task: candidates ranked (embeddings), reranked above a limit, then classified -----------------

class Stage2Payload(TaskPayload):
    facts: list[Fact]
    observations: list[Observation]
    rerank_limit: int | None = None


class Stage2Output(TaskOutput):
    classifications: list[Classification]


async def _run(backend, prompt, p: Stage2Payload, rank) -> Stage2Output:
    from credence.streams.llm.prompts import candidate_rerank  # it imports this module's refs

    obs = list(p.observations)
    if rank is not None:
        obs = await rank(p.facts, obs)
    if p.rerank_limit:
        keep = await backend.ask(candidate_rerank, p.facts, obs, p.rerank_limit, fit=backend.budget)
        by_id = {o.id: o for o in obs}
        obs = [by_id[i] for i in keep if i in by_id]
    return Stage2Output(classifications=await backend.ask(prompt, p.facts, obs, fit=backend.budget) if obs else [])


TASK = Task(TaskName.STAGE2, Stage2Payload, _run, Stage2Output, also=("candidate_rerank",))


# -- the rules backend's answer: the build's arguments in, what the call reads back out -------------

def rules_answer(facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Classification]:
    pairs = [c.model_dump() for c in matching.classify(facts, observations)]
    return [Classification.model_validate(c) for c in fit_answer(Output, {"classifications": pairs})["classifications"]]
