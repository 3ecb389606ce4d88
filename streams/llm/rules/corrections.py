"""Stage 1 for the ways people correct what they said before, read without a model.

One statement may carry two facts: the new value and the old one it replaces ("my cat's name is Miso, not
Mitten" is "The user has a cat named Miso." and "The user's cat is not named Mitten."), so Stage-2 can
dispute the old observation while synthesis keeps the new one. A statement that stops doing something
("I don't drink coffee anymore", "I'm not a nurse anymore", "I don't work as a nurse") is one negative
fact about the thing it names. Everything else is left to extraction's general patterns."""

from __future__ import annotations

import re
from collections.abc import Callable

from credence.streams.llm.models import Fact, Turn, fact_id
from credence.streams.llm.rules.reference import as_the_user, trim_tail
from credence.streams.llm.rules.text import cut_clause, normalise_subject, strip_fillers
from credence.tables.statement import is_self_contained

_NAME = r"[A-Z][\w'-]*(?: [A-Z][\w'-]*)?"
_THING = r"(?P<thing>[a-z][a-z -]{1,30}?)"
_NOT = r",? (?:and |but )?(?:not|rather than|instead of) (?:named |called )?"
_ANYMORE = r"(?: (?:anymore|any more|these days|now))+\b"
# Verbs whose "I don't … anymore" other patterns read better ("live in", "like") or that state no habit.
_OTHER_VERBS = {"live", "like", "love", "enjoy", "know", "think", "want", "need", "mind", "care", "remember",
                "understand", "see", "feel", "get", "mean", "say", "believe", "work"}


def _third_person(verb: str) -> str:
    v = verb.lower()
    if v == "have":
        return "has"
    if v.endswith(("s", "sh", "ch", "x", "z", "o")):
        return v + "es"
    if v.endswith("y") and v[-2:-1] not in "aeiou":
        return v[:-1] + "ies"
    return v + "s"


def _object(raw: str) -> str:
    return trim_tail(strip_fillers(cut_clause(raw)))


def _fact(turn: Turn, text: str, subject: str, polarity: str, importance: int) -> Fact | None:
    subject = normalise_subject(subject)
    if not subject or not is_self_contained(text)[0]:
        return None
    return Fact(id=fact_id([turn.id], subject, polarity, text), text=text, subject=subject, importance=importance,
                polarity=polarity, source_turn_ids=[turn.id], origin="user")  # type: ignore[arg-type]


def _renamed(m: re.Match[str], turn: Turn) -> list[Fact | None]:
    thing = m.group("thing").strip()
    new, old = m.group("new"), m.group("old")
    if new.lower() == old.lower():
        return []
    return [_fact(turn, f"The user has a {thing} named {new}.", thing, "positive", 8),
            _fact(turn, f"The user's {thing} is not named {old}.", thing, "negative", 8)]


def _no_longer_does(m: re.Match[str], turn: Turn) -> list[Fact | None]:
    verb, obj = m.group("verb"), _object(m.group("x"))
    if verb.lower() in _OTHER_VERBS or not obj:
        return []
    return [_fact(turn, f"The user no longer {_third_person(verb)} {as_the_user(obj)}.", obj, "negative", 7)]


def _no_longer_is(m: re.Match[str], turn: Turn) -> list[Fact | None]:
    obj = _object(m.group("x"))
    return [_fact(turn, f"The user is no longer {as_the_user(obj)}.", obj, "negative", 7)] if obj else []


def _not_working_as(m: re.Match[str], turn: Turn) -> list[Fact | None]:
    obj = _object(m.group("x"))
    return [_fact(turn, f"The user does not work as {as_the_user(obj)}.", "occupation", "negative", 9)] if obj else []


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


# First match wins. Names keep their case, so the rename patterns compile case-sensitively for the names.
CORRECTIONS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str], Turn], list[Fact | None]]], ...] = (
    (re.compile(rf"\b[Mm]y {_THING}(?:'s name is| is (?:named|called)) (?:actually |really )?(?P<new>{_NAME})"
                rf"{_NOT}(?P<old>{_NAME})\b"), _renamed),
    (re.compile(rf"\b[Mm]y {_THING}(?:'s name) is(?:n't| not) (?P<old>{_NAME}),? (?:but |it's |it is )?"
                rf"(?:actually )?(?P<new>{_NAME})\b"), _renamed),
    (re.compile(rf"\b[Mm]y {_THING} is(?:n't| not) (?:named|called) (?P<old>{_NAME}),? (?:but |it's |she's |he's )?"
                rf"(?:actually )?(?:named |called )?(?P<new>{_NAME})\b"), _renamed),
    (_rx(r"\bi (?:do not|don't|dont) work as (?P<x>.+)"), _not_working_as),
    (_rx(rf"\bi(?:'m| am) not (?P<x>(?:a|an) .+?){_ANYMORE}"), _no_longer_is),
    (_rx(rf"\bi (?:do not|don't|dont) (?:really )?(?P<verb>[a-z]+) (?P<x>.+?){_ANYMORE}"), _no_longer_does),
)


def correction_facts(statement: str, turn: Turn) -> list[Fact]:
    """The facts a correcting statement states (empty when it is not one of these forms)."""
    for pattern, read in CORRECTIONS:
        match = pattern.search(statement)
        if match:
            facts = [f for f in read(match, turn) if f is not None]
            if facts:
                return facts
    return []
