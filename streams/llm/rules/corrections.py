"""Stage 1 for the ways people correct what they said before, read without a model.

One statement may carry two facts: the new value and the old one it replaces ("my cat's name is Miso, not
Mitten" is "The user has a cat named Miso." and "The user's cat is not named Mitten."), so Stage-2 can
dispute the old observation while synthesis keeps the new one. A statement that stops doing something
("I don't drink coffee anymore", "I'm not a nurse anymore", "I don't work as a nurse") is one negative
fact about the thing it names. Everything else is left to extraction's general patterns."""

from __future__ import annotations

import re
from collections.abc import Callable

from credence.streams.llm.models import Fact, Turn
from credence.streams.llm.rules.reference import as_the_user, trim_tail
from credence.tables.origin import fact_id
from credence.tables.statement import is_self_contained
from credence.tables.text import cut_clause, normalise_subject, strip_fillers

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


# A statement that is no claim of the user's: a hypothetical ("If I quit coffee, I'd be grumpy") or
# someone else's words reported ("My sister says she quit coffee", "Tom told me: I moved to Lyon").
_NOT_A_CLAIM = re.compile(
    r"^(?:\w+ )?(?:if|what if|suppose|supposing|imagine|as if)\b|\b(?:i'd|i would)\b|"
    r"\b(?!i\b)[a-z]+ (?:says?|said|saying|tells? me|told me|keeps? saying|thinks?)\b|[\"\u201c\u201d]|"
    r"(?:^|\s)'(?=\w)",
    re.IGNORECASE,
)


def not_a_claim(statement: str) -> bool:
    return _NOT_A_CLAIM.search(statement) is not None


# "I like dogs, not cats": the statement, and the value it takes back.
_NOT_TAIL = re.compile(
    r"^(?P<head>.+?\w)(?:,| but| and|, but|, and) not (?P<old>(?!(?:really|at all|anymore|any more|now|today|sure|yet|"
    r"always|quite|much|so|very|too|that|this|it|a lot|a (?:big |huge )?fan|fond|into|keen|happy|crazy)\b)"
    r"[\w' -]+?)[.!]?$",
    re.IGNORECASE,
)
_TWINS = (
    (re.compile(r"^The user (?:likes|loves|enjoys|prefers|is a fan of) ", re.IGNORECASE), "The user does not like {}."),
    (re.compile(r"^The user is learning ", re.IGNORECASE), "The user is not learning {}."),
    (re.compile(r"^The user lives in ", re.IGNORECASE), "The user does not live in {}."),
    (re.compile(r"^The user works as ", re.IGNORECASE), "The user does not work as {}."),
)


def not_tail(statement: str) -> tuple[str, str | None]:
    """("I like dogs", "cats") for "I like dogs, not cats"; (statement, None) when there is no such tail."""
    match = _NOT_TAIL.match(statement.strip())
    return (match.group("head"), match.group("old").strip()) if match else (statement, None)


def taken_back(fact: Fact | None, old: str | None, turn: Turn) -> Fact | None:
    """The negative twin of a positive fact for the value its statement said it is not."""
    if fact is None or old is None or fact.polarity != "positive":
        return None
    for says, template in _TWINS:
        if says.match(fact.text):
            value = _object(old)
            subject = fact.subject if fact.subject in ("home", "occupation") else value
            return _fact(turn, template.format(as_the_user(value)), subject, "negative", fact.importance) if value \
                else None
    return None
