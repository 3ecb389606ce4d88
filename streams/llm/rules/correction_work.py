"""The correction task read without a model: how a newer statement on an entry's topic changes it.

Compared on what ``restatement_stems`` keeps of each text: the content stems and the predicate's kind.
A new statement of the other polarity about the same thing replaces the old one ("loves coffee" then
"does not drink coffee"). Of the same polarity, one that says all the old one does and more is merged
(its text kept); one giving another value of something that holds once (where the user lives, their
work, a name) replaces it; one that says less leaves the old standing; anything else is a similar topic
with no contradiction, and both stand. The user's newer word wins: scores play no part offline."""

from __future__ import annotations

from collections.abc import Sequence

from credence.streams.llm.models import CorrectionDecision, CorrectionItem
from credence.tables.text import polarity_of, restatement_stems

# Predicates whose value holds once: another value replaces the old rather than joining it.
SINGLE_VALUED = frozenset({"@live", "@work", "@name"})


def _split(text: str) -> tuple[frozenset[str], frozenset[str]]:
    stems = restatement_stems(text)
    marks = frozenset(s for s in stems if s.startswith("@"))
    return marks, stems - marks


def decide(old: str, new: str) -> tuple[str, str]:
    """(action, merged text or "") for one pair."""
    (old_marks, old_stems), (new_marks, new_stems) = _split(old), _split(new)
    if polarity_of(old) != polarity_of(new):
        return ("keep_new", "") if old_stems & new_stems else ("keep_both", "")
    shared_kind = old_marks & new_marks or not (old_marks or new_marks)
    if shared_kind and old_stems and new_stems >= old_stems:
        return ("merge", new.strip()) if new_stems > old_stems else ("keep_old", "")
    if shared_kind and old_stems > new_stems:
        return "keep_old", ""
    single = old_marks & new_marks & SINGLE_VALUED
    # "has a cat named Mitten" / "has a dog named Rex" are two animals; a name replaces a name only for
    # the same one (some content in common), a place or a job replaces its own kind outright.
    if single and old_stems != new_stems and (single - {"@name"} or old_stems & new_stems):
        return "keep_new", ""
    return "keep_both", ""


def correct(items: Sequence[CorrectionItem]) -> list[CorrectionDecision]:
    decisions = []
    for item in items:
        action, text = decide(item.old.text, item.new_text)
        decisions.append(CorrectionDecision(id=item.id, action=action, text=text))  # type: ignore[arg-type]
    return decisions
