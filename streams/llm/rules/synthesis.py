"""Reflection synthesis and the merge-on-promote decision, grouped by subject."""

from __future__ import annotations

from collections.abc import Sequence

from credence.streams.llm.models import Fact, MergeDecision, Observation, ReflectionDraft
from credence.streams.llm.rules.matching import EXCLUSIVE_SUBJECTS, NAMED
from credence.tables.text import content_stems, normalise_subject, polarity_of


def _key(subject: str) -> frozenset[str]:
    return frozenset(content_stems(normalise_subject(subject))) or frozenset({subject.strip().lower()})


def _restates(text: str, subject: str, related: Sequence[Observation]) -> bool:
    """Same subject, same polarity, and nothing the observation does not say: "lives in Lisbon" is a new
    value beside "lives in Berlin", not a restatement of it."""
    key, said = _key(subject), content_stems(text)
    valued = key & EXCLUSIVE_SUBJECTS or NAMED.search(text)  # subjects that hold one value at a time
    return any(o.subject and _key(o.subject) == key and polarity_of(o.text) == polarity_of(text)
               and (not valued or said <= content_stems(o.text) | _key(o.subject)) for o in related)


def synthesize(facts: Sequence[Fact], related: Sequence[Observation] = ()) -> list[ReflectionDraft]:
    """One reflection per subject; the latest fact states it (users change their minds), and every fact
    on the subject is a source. A subject that only restates a related observation gives none."""
    groups: dict[frozenset[str], list[Fact]] = {}
    for fact in facts:
        groups.setdefault(_key(fact.subject), []).append(fact)
    return [
        ReflectionDraft(text=group[-1].text, subject=group[-1].subject, source_fact_ids=[f.id for f in group])
        for group in groups.values()
        if not _restates(group[-1].text, group[-1].subject, related)
    ]


def _stronger(reflection: ReflectionDraft, entry: Observation) -> bool:
    """The reflection's evidence beats the entry's; without both scores the entry stands."""
    return reflection.score is not None and entry.score is not None and reflection.score > entry.score


def merge_decision(reflection: ReflectionDraft, persona_entries: Sequence[Observation]) -> MergeDecision:
    text = reflection.text.strip()
    if not text:
        return MergeDecision(action="reject", target_id=None, text="")
    key = _key(reflection.subject)
    for entry in persona_entries:
        if entry.subject and _key(entry.subject) == key:
            if polarity_of(entry.text) != polarity_of(text) and not _stronger(reflection, entry):
                return MergeDecision(action="reject", target_id=None, text=text)
            return MergeDecision(action="merge", target_id=entry.id, text=text)
    return MergeDecision(action="create", target_id=None, text=text)
