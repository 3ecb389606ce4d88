"""Stage 1 without a model: first-person statement patterns -> facts with subject, polarity, importance.

Importance follows the prompt's scale: name/identity 9, strong feelings 8, casual 6, an intensifier
("really", "absolutely") adds one, and 10 only when the user explicitly asks to remember it (10 seeds a
reflection at 0.8: an identity claimed in role-play must not start there)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from credence.streams.llm.models import Fact, Turn
from credence.streams.llm.rules import corrections, refusals
from credence.streams.llm.rules.reference import (
    as_the_user,
    named_people,
    named_proper,
    named_things,
    resolve,
    resolve_inside,
    trim_tail,
)
from credence.tables.origin import fact_id
from credence.tables.statement import is_self_contained
from credence.tables.text import clean, cut_clause, normalise_subject, strip_fillers

_PETS = r"dog|puppy|cat|kitten|parrot|hamster|rabbit|horse|fish|bird|turtle|snake|guinea pig"
_INTENSE = r"(?P<intense>really |absolutely |truly |just )?"
_IGNORED_SUBJECTS = {"", "you", "it", "that", "this", "them", "him", "her", "to", "so"}
_MAX_OBJECT_WORDS = 8
_REMEMBER = re.compile(
    r"\b(?:remember (?:this|that)|please remember|don't forget|do not forget|merk dir|vergiss nicht|"
    r"recuerda esto|no lo olvides|no olvides)\b",
    re.IGNORECASE,
)
REMEMBERED = 10


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    polarity: str
    importance: int
    template: str  # formatted with the match's groups; {x} is the cleaned object phrase
    subject: str | None = None  # fixed key for identity facts; otherwise derived from the object
    drop_gerund: bool = False  # "stopped drinking coffee" is about "coffee"
    drop_verb: bool = False  # "no longer eat meat" is about "meat"
    subject_group: str = "x"


def _p(pattern: str, polarity: str, importance: int, template: str, **kw) -> _Pattern:
    return _Pattern(re.compile(pattern, re.IGNORECASE), polarity, importance, template, **kw)


# First match wins, so negated and specific forms come before the general ones they contain.
PATTERNS: tuple[_Pattern, ...] = (
    _p(r"\bmy name is (?P<x>.+)", "positive", 9, "The user's name is {x}.", subject="name"),
    _p(r"\b(?:call me|i'm called|i am called) (?P<x>.+)", "positive", 9, "The user's name is {x}.",
       subject="name"),
    _p(r"\bi(?:'m| am) no longer (?P<x>.+)", "negative", 6, "The user says they are no longer {x}.",
       drop_gerund=True),
    _p(r"\bi no longer live in (?P<x>.+)", "negative", 9, "The user no longer lives in {x}.",
       subject="home"),
    _p(r"\bi no longer (?P<x>.+)", "negative", 6, "The user says they no longer {x}.", drop_verb=True),
    _p(r"\bi (?:have )?(?P<verb>stopped|quit|gave up) (?P<x>.+)", "negative", 6,
       "The user says they {verb} {x}.", drop_gerund=True),
    _p(r"\bi (?:do not|don't|dont) live in (?P<x>.+)", "negative", 9, "The user does not live in {x}.",
       subject="home"),
    _p(r"\bi (?:do not|don't|dont) (?:really |even )?(?:like|love|enjoy|care for) (?P<x>.+)", "negative",
       6, "The user does not like {x}."),
    _p(r"\bi (?:really |absolutely )?(?:hate|detest|loathe|can't stand|cannot stand) (?P<x>.+)",
       "negative", 8, "The user hates {x}."),
    _p(r"\bi " + _INTENSE + r"dislike (?P<x>.+)", "negative", 6, "The user dislikes {x}."),
    _p(r"\bi(?:'m| am) (?:currently |now )?(?:learning|studying) (?P<x>.+)", "positive", 6,
       "The user is learning {x}."),
    _p(r"\bi (?:live in|moved to)(?: the)? (?P<x>.+)", "positive", 9, "The user lives in {x}.",
       subject="home"),
    _p(r"\bi(?:'m| am) living in (?P<x>.+)", "positive", 9, "The user lives in {x}.", subject="home"),
    _p(r"\bi work as (?P<x>.+)", "positive", 9, "The user works as {x}.", subject="occupation"),
    _p(r"\bmy job is (?P<x>.+)", "positive", 9, "The user works as {x}.", subject="occupation"),
    _p(r"\bi(?:'m| am) (?P<x>an? .+?) by (?:profession|trade)", "positive", 9, "The user works as {x}.",
       subject="occupation"),
    _p(r"\bi (?:have|own|got) (?P<x>(?:a|an|one|two|three|four|\d+) (?:[\w-]+ )?(?P<pet>" + _PETS
       + r")s?\b(?: (?:named|called) \w+)?)", "positive", 7, "The user has {x}.", subject_group="pet"),
    _p(r"\bi " + _INTENSE + r"(?:love|adore) (?P<x>.+)", "positive", 8, "The user loves {x}."),
    _p(r"\bi(?:'m| am) a (?:big |huge )?fan of (?P<x>.+)", "positive", 7, "The user is a fan of {x}."),
    _p(r"\bi " + _INTENSE + r"(?P<verb>like|enjoy) (?P<x>.+)", "positive", 6, "The user {verb}s {x}."),
    _p(r"\bi " + _INTENSE + r"prefer (?P<x>.+?)(?: (?:to|over|rather than) .*)?$", "positive", 6,
       "The user prefers {x}."),
)

# Sentences, and clauses joined by "and/but" or a comma that start a new first-person statement ("I don't
# live in Berlin anymore, I live in Lisbon now" is two).
_SPLIT = re.compile(r"[.!?;\n]+|,?\s+(?:and|but)\s+(?=(?:i|i'm|my)\b)|,\s+(?=(?:i|i'm)\s)", re.IGNORECASE)


@dataclass
class _Mentions:
    """What the turn named before the statement: the speaker's things ("my dogs"), proper names and the
    people they call theirs: what a pronoun or a demonstrative in a later statement may point at."""
    things: list[str] = field(default_factory=list)
    proper: list[str] = field(default_factory=list)
    people: list[str] = field(default_factory=list)

    def with_(self, text: str) -> _Mentions:
        """A copy that also holds what ``text`` names."""
        out = _Mentions(list(self.things), list(self.proper), list(self.people))
        out.add(text)
        return out

    def add(self, text: str) -> None:
        self.things += named_things(text)
        self.proper += named_proper(text)
        self.people += named_people(text)


def _object_phrase(raw: str) -> str:
    words = strip_fillers(cut_clause(raw)).split()
    return trim_tail(" ".join(words[:_MAX_OBJECT_WORDS]), capped=len(words) > _MAX_OBJECT_WORDS)


def _subject(pattern: _Pattern, match: re.Match[str], obj: str) -> str:
    if pattern.subject:
        return pattern.subject
    phrase = match.group(pattern.subject_group) if pattern.subject_group != "x" else obj
    words = phrase.split()
    if len(words) > 1 and (pattern.drop_verb or (pattern.drop_gerund and words[0].lower().endswith("ing"))):
        words = words[1:]
    return normalise_subject(" ".join(words))


def _worded(pattern: _Pattern, match: re.Match[str], obj: str) -> str:
    groups = {k: (v or "").strip() for k, v in match.groupdict().items()}
    return pattern.template.format(**{**groups, "x": as_the_user(obj)})


def _unresolved(pattern: _Pattern, match: re.Match[str], phrase: str, refused: list[str] | None) -> None:
    """A phrase naming someone or something the turn does not: the gate's reason for the fact worded
    with it goes to `refused` (dangling_reference when the gate would let it through)."""
    if refused is not None:
        ok, reason = is_self_contained(_worded(pattern, match, phrase))
        refused.append("dangling_reference" if ok else reason)


def _fact_from(pattern: _Pattern, match: re.Match[str], turn: Turn, named: _Mentions,
               refused: list[str] | None = None) -> Fact | None:
    """The fact a pattern reads; None when it reads none, and a drop the gate's rule made goes to `refused`
    with its reason (/metrics counts them: refusals.py)."""
    raw = resolve(match.group("x"), named.things)
    if raw is None:
        # a pronoun the turn does not resolve: nobody could read the fact alone
        return _unresolved(pattern, match, match.group("x").strip(), refused)
    obj = resolve_inside(_object_phrase(raw), named.proper, named.people, named.things)
    if obj is None:
        # "i love her cooking": someone the turn does not name
        return _unresolved(pattern, match, _object_phrase(raw), refused)
    subject = _subject(pattern, match, obj) if raw == match.group("x") else normalise_subject(raw.split()[-1])
    if not obj or subject in _IGNORED_SUBJECTS:
        return None
    groups = {k: (v or "").strip() for k, v in match.groupdict().items()}
    text = _worded(pattern, match, obj)
    ok, reason = is_self_contained(text)
    if not ok:
        if refused is not None:
            refused.append(reason)
        return None
    importance = min(9, pattern.importance + (1 if groups.get("intense") in {"really", "absolutely", "truly"} else 0))
    return Fact(
        id=fact_id([turn.id], subject, pattern.polarity, text),
        text=text,
        subject=subject,
        importance=importance,
        polarity=pattern.polarity,  # type: ignore[arg-type]
        source_turn_ids=[turn.id],
        origin="user",
    )


def facts_in_statement(statement: str, turn: Turn, named: _Mentions | None = None,
                       refused: list[str] | None = None) -> Fact | None:
    """The fact one statement states; ``named`` is what the turn named before it (for pronouns); the
    gate's reasons for the readings it dropped go to ``refused``."""
    for pattern in PATTERNS:
        match = pattern.regex.search(statement)
        if match:
            before = (named or _Mentions()).with_(statement[:match.start("x")])
            fact = _fact_from(pattern, match, turn, before, refused)
            if fact is not None:
                return fact  # else a later pattern may still read the statement ("..., I stopped last month")
    return None


def extract_facts(turns: Sequence[Turn]) -> list[Fact]:
    """Facts from user turns only: the AI's own words never become evidence about the user."""
    facts: dict[str, Fact] = {}
    for turn in turns:
        if turn.role != "user":
            continue
        text = clean(turn.text)
        remember = _REMEMBER.search(text) is not None
        named = _Mentions()
        for statement in _SPLIT.split(text):
            if corrections.not_a_claim(statement):
                named.add(statement)
                continue  # a hypothetical or someone else's words: nothing the user claims
            found = corrections.correction_facts(statement.strip(), turn)
            refused: list[str] = []
            if not found:
                head, old = corrections.not_tail(statement)
                fact = facts_in_statement(head.strip(), turn, named, refused) if old else None
                found = [fact, corrections.taken_back(fact, old, turn)] if fact else \
                    [facts_in_statement(statement.strip(), turn, named, refused)]
            if refused and not any(found):
                refusals.count("stage1", refused[0])  # TaskName.STAGE1: the step's label for this task
            named.add(statement)
            for fact in (f for f in found if f is not None):
                facts.setdefault(fact.id, fact.model_copy(update={"importance": REMEMBERED}) if remember else fact)
    return list(facts.values())
