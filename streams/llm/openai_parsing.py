"""Turning a model's structured output into the layer's records, refusing what cannot be trusted.

Output that names an id the input never had (a turn, fact or observation) is treated like output
that fails its schema: the attempt is retried rather than evidence applied to the wrong entry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from credence.streams.llm.models import (
    Classification,
    Fact,
    FeedbackDecision,
    MergeDecision,
    Observation,
    ReflectionDraft,
    Turn,
    fact_id,
)
from credence.streams.llm.prompts import (
    merge_decision,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)


class TransientFailure(Exception):
    """A failed attempt worth retrying; retry_after is the server's hint, when it gave one."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class InvalidOutput(TransientFailure):
    """The output parsed but refers to something that was not in the input."""


def _require_known(ids: Iterable[str], known: set[str], what: str) -> None:
    unknown = sorted(set(ids) - known)
    if unknown:
        raise InvalidOutput(f"output names unknown {what} id(s) {unknown[:5]}")


def parse_ids(ids: Sequence[str], known: Sequence[str]) -> list[str]:
    _require_known(ids, set(known), "observation")
    return list(dict.fromkeys(ids))


def parse_facts(out: stage1_extraction.Output, turns: Sequence[Turn]) -> list[Fact]:
    roles = {t.id: t.role for t in turns}
    facts: dict[str, Fact] = {}
    for item in out.facts:
        if not item.source_turn_ids:
            raise InvalidOutput("a fact cites no source turn")
        _require_known(item.source_turn_ids, set(roles), "turn")
        # Origin comes from the cited turns, not the model's say-so: AI-only facts stay out of Stage 2.
        origin = "user" if any(roles[t] == "user" for t in item.source_turn_ids) else "ai"
        subject = item.subject.strip().lower()
        fid = fact_id(item.source_turn_ids, subject, item.polarity, item.text)
        facts.setdefault(fid, Fact(
            id=fid, text=item.text.strip(), subject=subject, importance=item.importance,
            polarity=item.polarity, source_turn_ids=list(item.source_turn_ids), origin=origin,
        ))
    return list(facts.values())


def parse_classifications(
    out: stage2_classification.Output, payload: stage2_classification.Input
) -> list[Classification]:
    _require_known((p.fact_id for p in out.classifications), {f.id for f in payload.facts}, "fact")
    _require_known((p.observation_id for p in out.classifications), {o.id for o in payload.observations}, "observation")
    pairs: dict[tuple[str, str], Classification] = {}
    for p in out.classifications:
        pairs.setdefault((p.fact_id, p.observation_id), Classification(
            fact_id=p.fact_id, observation_id=p.observation_id, relation=p.relation
        ))
    return list(pairs.values())


def parse_feedback(out: surfaced_feedback.Output, surfaced: Sequence[Observation]) -> list[FeedbackDecision]:
    _require_known((d.id for d in out.decisions), {o.id for o in surfaced}, "surfaced reflection")
    given: dict[str, str] = {}
    for d in out.decisions:
        given.setdefault(d.id, d.decision)
    # A surfaced reflection the model left out was not addressed by the reply.
    return [FeedbackDecision(id=o.id, decision=given.get(o.id, "ignore")) for o in surfaced]  # type: ignore[arg-type]


def parse_reflections(out: reflection_synthesis.Output, facts: Sequence[Fact]) -> list[ReflectionDraft]:
    known = {f.id for f in facts}
    drafts = []
    for r in out.reflections:
        if not r.source_fact_ids:
            raise InvalidOutput("a reflection cites no source fact")
        _require_known(r.source_fact_ids, known, "fact")
        drafts.append(ReflectionDraft(
            text=r.text.strip(), subject=r.subject.strip().lower(),
            source_fact_ids=list(dict.fromkeys(r.source_fact_ids)),
        ))
    return drafts


def parse_merge(out: merge_decision.Output, persona_entries: Sequence[Observation]) -> MergeDecision:
    if out.action == "merge":
        if out.target_id is None:
            raise InvalidOutput("merge without a target_id")
        _require_known([out.target_id], {e.id for e in persona_entries}, "persona entry")
        return MergeDecision(action="merge", target_id=out.target_id, text=out.text.strip())
    return MergeDecision(action=out.action, target_id=None, text=out.text.strip())
