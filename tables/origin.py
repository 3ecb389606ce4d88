"""Whose fact is it: the seed's no-self-reinforcement rule at Stage-1. Facts drawn from what the AI said
never enter Stage-2 or synthesis; the user's facts do.

A fact is the user's only if every content-bearing turn it cites is a user turn. A user's bare assent
("yes", "ok") carries no content of its own, and an AI question carries none either: an AI question
answered "yes" is the user's statement, while an AI statement the user merely acknowledged is not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Final

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings

USER: Final = "user"
AI: Final = "ai"
# Words that may stand beside an assent without adding content ("yes, I do", "ok, it is").
_ASSENT_FILLERS: Final = frozenset("i do did am is it that that's so much of course please".split())


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() or c in "'-" else " " for c in text).split()


def is_assent(text: str, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    """A reply that only agrees: every word an assent word (any language) or a filler, one assent at least."""
    assents = {w.lower() for words in settings.assent_words.values() for w in words}
    words = _words(text)
    if not words:
        return False
    if any(w in assents for w in words) and all(w in assents or w in _ASSENT_FILLERS for w in words):
        return True
    # scripts without spaces: the whole reply is one assent ("はい", "是的")
    return "".join(words) in assents


def is_question(text: str) -> bool:
    return text.rstrip().endswith(("?", "？"))


def content_bearing(turn: Mapping, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> bool:
    if turn["role"] == USER:
        return not is_assent(turn["text"], settings=settings)
    return not is_question(turn["text"])


def fact_origin(
    source_turn_ids: Iterable[str], turns: Mapping[str, Mapping], *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> str:
    """"user" or "ai" for a fact citing ``source_turn_ids`` among ``turns`` (id -> {"role", "text"})."""
    cited = [turns[i] for i in dict.fromkeys(source_turn_ids) if i in turns]
    if not any(t["role"] == USER for t in cited):
        return AI
    if all(t["role"] == USER for t in cited if content_bearing(t, settings=settings)):
        return USER
    return AI


def fact_id(source_turn_ids: list[str], subject: str, polarity: str, text: str) -> str:
    """Content-derived id: the same statement extracted twice (a retry, a replay) gets the same id,
    so downstream de-duplication needs no extra state."""
    key = "\x1f".join([",".join(sorted(source_turn_ids)), subject.strip().lower(), polarity, text.strip()])
    return "f_" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
