"""Stage 2, candidate rerank and the negative-keyword target check, by subject overlap and negation cues.

An observation's polarity is read from its own wording ("The user does not like coffee" is negative),
so observations need no stored polarity."""

from __future__ import annotations

import re
from collections.abc import Sequence

from credence.streams.llm.models import Classification, Fact, Observation
from credence.tables.text import REBUTTAL_WORDS, content_stems, normalise_subject, polarity_of

# Subjects that hold one value at a time: a different value is a contradiction, not a new fact.
EXCLUSIVE_SUBJECTS = frozenset({"name", "home", "occupation"})
# An observation's exclusive subject read from its wording when a synthesis draft keyed it otherwise
# ("The user loves living in Berlin." under "living in berlin" is still about where the user lives).
_SAYS_EXCLUSIVE = (("home", re.compile(r"\b(?:lives?|living|moved) (?:in|to)\b", re.IGNORECASE)),
                   ("occupation", re.compile(r"\bworks? as\b", re.IGNORECASE)))
_SPEAKS_OF_WORK = re.compile(r"\b(?:job|career|profession|occupation|work)\b", re.IGNORECASE)
NAMED = re.compile(r"\b(?:named|called)\s+([A-Z][\w'-]*)")


def _exclusive_subject(obs: Observation) -> str:
    if obs.subject in EXCLUSIVE_SUBJECTS:
        return obs.subject
    return next((key for key, says in _SAYS_EXCLUSIVE if says.search(obs.text)), obs.subject)


def _names_differ(fact: Fact, obs: Observation) -> bool:
    """Both name the thing and the names differ: "a cat named Miso" says nothing of "a cat named Mitten"."""
    a, b = NAMED.search(fact.text), NAMED.search(obs.text)
    return a is not None and b is not None and a.group(1).lower() != b.group(1).lower()


def _subject_stems(subject: str) -> set[str]:
    return content_stems(normalise_subject(subject))


def shares_subject(fact: Fact, obs: Observation) -> bool:
    if fact.subject in EXCLUSIVE_SUBJECTS or obs.subject in EXCLUSIVE_SUBJECTS:
        if fact.subject == _exclusive_subject(obs):
            return True
        # "The user is no longer a nurse." (keyed "nurse") takes back "The user works as a nurse."
        wanted = _subject_stems(fact.subject)
        return fact.polarity == "negative" and bool(wanted) and wanted <= content_stems(obs.text)
    if obs.subject and normalise_subject(obs.subject) == normalise_subject(fact.subject):
        return True
    wanted = _subject_stems(fact.subject)
    return bool(wanted) and wanted <= (content_stems(obs.text) | _subject_stems(obs.subject))


def _value_stems(fact: Fact) -> set[str]:
    """What an identity fact asserts ("Berlin" in "The user lives in Berlin.")."""
    return content_stems(fact.text) - {"user", "name", "say", "they", "longer"}


def _said_again(fact: Fact, obs: Observation) -> bool:
    """The fact says everything the observation does, and more: the same value with detail, not another."""
    said = content_stems(obs.text) - {"user", "name", "say", "they", "longer"}
    return bool(said) and said <= _value_stems(fact)


def relation(fact: Fact, obs: Observation) -> str | None:
    if not shares_subject(fact, obs) or _names_differ(fact, obs):
        return None
    same_direction = polarity_of(obs.text) == fact.polarity
    if fact.subject in EXCLUSIVE_SUBJECTS and not _value_stems(fact) <= content_stems(obs.text):
        if fact.polarity == "positive" and same_direction and _said_again(fact, obs):
            return "reinforce"  # "works as a nurse at the hospital" restates "works as a nurse"
        # "lives in Paris" contradicts "lives in Berlin"; "no longer lives in Berlin" says nothing of Paris.
        return "negate" if fact.polarity == "positive" and same_direction else None
    return "reinforce" if same_direction else "negate"


def classify(facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Classification]:
    out: list[Classification] = []
    for fact in facts:
        for obs in observations:
            rel = relation(fact, obs)
            if rel is not None:
                out.append(Classification(fact_id=fact.id, observation_id=obs.id, relation=rel))  # type: ignore[arg-type]
    return out


def _overlap(query: set[str], obs: Observation) -> int:
    return len(query & (content_stems(obs.text) | _subject_stems(obs.subject)))


def rerank(facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[str]:
    """Observations sharing content words with the facts, most shared first; ties keep input order."""
    query: set[str] = set()
    for fact in facts:
        query |= content_stems(fact.text) | _subject_stems(fact.subject)
    scored = [(_overlap(query, obs), i, obs.id) for i, obs in enumerate(observations)]
    ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
    return [obs_id for _, _, obs_id in ranked[:limit]]


def target_check(last_user_messages: Sequence[str], observations: Sequence[Observation], ai_text: str = "") -> list[str]:
    """The observation(s) whose subject the user's latest message names most. A bare rebuttal ("No, that's
    wrong.") names nothing itself: it answers what the AI just said, so it targets the observations whose
    subject the AI's turn names. An earlier message never makes the latest one about its subject."""
    latest = last_user_messages[-1] if last_user_messages else ""
    said = content_stems(latest) - REBUTTAL_WORDS
    said_by_user = bool(said)
    if not said and ai_text:
        said = content_stems(ai_text)
    if _SPEAKS_OF_WORK.search(latest):
        said |= {"occupation"}  # "my job" is what an occupation entry is keyed by
    scores = [(len(said & (_subject_stems(obs.subject) or content_stems(obs.text))), obs.id) for obs in observations]
    if said_by_user and not any(score for score, _ in scores):  # "forget that I live in Berlin": not "home"
        scores = [(len(said & content_stems(obs.text)), obs.id) for obs in observations]
    best = max((score for score, _ in scores), default=0)
    return [obs_id for score, obs_id in scores if best > 0 and score == best]
