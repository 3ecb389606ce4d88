"""The keyword hooks on a turn's text (config: negative_keywords, forget_keywords, per language): a keyword
only nominates a check, the LLM decides. A word in a Latin script matches whole words of the text with its
punctuation dropped ("don't" keeps its apostrophe); a word in another script matches anywhere in it (CJK has
no spaces). Pure: no clock, no I/O.

A user turn goes through every hook: `KeywordText` normalises its text once for all of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Everything but letters, digits (str.isalnum: \w less "_") and the apostrophe becomes a word break; most
# turns are ASCII, where one table lookup a character does it.
_BREAK = re.compile(r"[^\w']|_")
_ASCII_BREAKS = {c: " " for c in range(128) if not (chr(c).isalnum() or chr(c) == "'")}


@dataclass(frozen=True, slots=True)
class KeywordText:
    padded: str  # " word word ... ": lowercased words with single spaces, a space either side
    lowered: str  # the whole text lowercased, for words in scripts without spaces

    @classmethod
    def of(cls, text: str) -> KeywordText:
        spaced = text.translate(_ASCII_BREAKS) if text.isascii() else _BREAK.sub(" ", text)
        return cls(f" {' '.join(spaced.lower().split())} ", text.lower())

    def has_any(self, keywords: dict[str, list[str]]) -> bool:
        spaced, anywhere = _patterns(tuple(tuple(words) for words in keywords.values()))
        return bool(spaced and spaced.search(self.padded)) or bool(anywhere and anywhere.search(self.lowered))


# Keyed by the words themselves, so settings that change get their own patterns; a handful of keyword sets
# live in a worker (one per hook), each asked about every user turn.
@lru_cache(maxsize=64)
def _patterns(words: tuple[tuple[str, ...], ...]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """An alternation of literals finds a match exactly when one of them is a substring: " word " in the
    padded text for Latin-script words, the word itself in the lowered text for the others."""
    lowered = [w.lower() for group in words for w in group]

    def alternation(literals: list[str]) -> re.Pattern[str] | None:
        return re.compile("|".join(map(re.escape, literals))) if literals else None  # "" would match anything

    return alternation([f" {w} " for w in lowered if w.isascii()]), alternation([w for w in lowered if not w.isascii()])
