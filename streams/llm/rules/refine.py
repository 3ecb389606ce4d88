"""The rules backend's refine answer: conservative, lexical, the same every time.

- split: an entry that joins two statements about the user with "and", the second opening with a verb of
  its own ("The user loves hiking and has a dog named Rex."), becomes those two statements;
- merge: entries that restate each other (the restatement rule synthesis and `memory dedupe` use:
  tables.statement.restates on the predicate kind and content stems) become the one that says the most;
- modify and discard need judgement the rules do not have: never answered here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from credence.config.memory import DEFAULT_MEMORY_SETTINGS
from credence.streams.llm.models import Observation, RefineAction
from credence.tables.statement import is_self_contained, restates
from credence.tables.text import polarity_of, restatement_stems

_CONJUNCTION = re.compile(r"^(The user) (\S.*?),? and (\w+) (\S.*?)[.!]?$")
# Verbs that open a statement of their own after "and" ("... and has a dog"), not a second object
# ("... loves hiking and camping").
_VERBS = frozenset({
    "has", "is", "was", "lives", "works", "loves", "likes", "enjoys", "hates", "dislikes", "owns",
    "plays", "speaks", "studies", "drinks", "eats", "prefers", "wants", "visits", "reads", "writes",
    "runs", "cooks", "teaches", "learns", "grew", "moved", "goes", "keeps", "uses", "rides", "watches",
})
# The base form a restated first-person clause keeps ("... and have a dog"), said of the user.
_THIRD_PERSON = {"have": "has", "am": "is", "do": "does", "go": "goes", "study": "studies", "watch": "watches"} | {
    v[:-1]: v for v in ("lives", "works", "loves", "likes", "enjoys", "hates", "owns", "plays", "speaks", "drinks",
                        "eats", "prefers", "wants", "visits", "reads", "writes", "runs", "cooks", "keeps",
                        "uses", "rides")}


def split_statement(text: str) -> list[str]:
    """The two statements a conjunction joins, each readable alone; [] when it is one statement."""
    m = _CONJUNCTION.match(text.strip())
    verb = m.group(3).lower() if m else ""
    verb = _THIRD_PERSON.get(verb, verb)
    if m is None or verb not in _VERBS:
        return []
    first = f"{m.group(1)} {m.group(2)}."
    second = f"{m.group(1)} {verb} {m.group(4)}."
    if not all(is_self_contained(t)[0] for t in (first, second)):
        return []
    return [first, second]


def _same(a: str, b: str) -> bool:
    stems_a, stems_b = restatement_stems(a), restatement_stems(b)
    kinds_a = {s for s in stems_a if s.startswith("@")}
    kinds_b = {s for s in stems_b if s.startswith("@")}
    content_a, content_b = stems_a - kinds_a, stems_b - kinds_b
    if (kinds_a != kinds_b and not kinds_a & kinds_b) or not content_a or not content_b:
        return False
    return restates(content_a, content_b, polarity_of(a) == polarity_of(b),
                    jaccard=DEFAULT_MEMORY_SETTINGS.restatement_jaccard,
                    containment_min=DEFAULT_MEMORY_SETTINGS.restatement_containment_min_stems)


def _richest(group: list[Observation]) -> str:
    """The text whose stems hold every other's, else the best-supported one's."""
    for e in group:
        if all(restatement_stems(o.text) <= restatement_stems(e.text) for o in group):
            return e.text
    return max(group, key=lambda e: (e.score or 0.0, e.text)).text


def refine(entries: Sequence[Observation]) -> list[RefineAction]:
    actions: list[RefineAction] = []
    rest = []
    for e in entries:
        pieces = split_statement(e.text)
        if pieces:
            actions.append(RefineAction(action="split", source_ids=[e.id], texts=pieces, reason="two statements"))
        else:
            rest.append(e)
    grouped: set[str] = set()
    for i, e in enumerate(rest):
        if e.id in grouped:
            continue
        group = [e, *(o for o in rest[i + 1:] if o.id not in grouped and _same(e.text, o.text))]
        if len(group) > 1:
            grouped.update(o.id for o in group)
            actions.append(RefineAction(action="merge", source_ids=[o.id for o in group], texts=[_richest(group)],
                                        reason="the same statement"))
    return actions
