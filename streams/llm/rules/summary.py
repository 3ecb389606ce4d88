"""The rules backend's recent-conversation memo: extractive and deterministic. Each turn that says
something (three words or more; not a character's bare question) becomes one quoted line, "The user: "…"" or "The character: "…"", cut to
its first sentences; the old memo's lines come first, and the oldest lines go when the memo would be
over its budget. Nothing is paraphrased, so nothing is invented, and a user's objection stays word for
word."""

from __future__ import annotations

import re
from collections.abc import Sequence

from credence.streams.llm.models import Turn
from credence.tables.tokens import approximate_tokens

LINE_CHARS = 240  # what one turn keeps in the memo (a prompt's MAX_TEXT)
MIN_WORDS = 3  # "hi", "ok thanks", "yes please": nothing to keep
_WORDS = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


def _gist(text: str) -> str:
    """The turn's first sentences within LINE_CHARS (a whole sentence when the first one is longer, cut
    at a word)."""
    text = " ".join(text.split()).replace('"', "'")
    kept = ""
    for sentence in _SENTENCE_END.split(text):
        if kept and len(kept) + 1 + len(sentence) > LINE_CHARS:
            break
        kept = f"{kept} {sentence}".strip()
    if len(kept) > LINE_CHARS:
        kept = kept[:LINE_CHARS].rsplit(" ", 1)[0] + " …"
    return kept


def _only_asks(text: str) -> bool:
    """A turn ending in a question with no statement (a sentence ending in a full stop) in it."""
    sentences = _SENTENCE_END.split(text.strip())
    return sentences[-1].endswith(("?", "？")) and not any(x.endswith((".", "。")) for x in sentences)


def line(turn: Turn) -> str | None:
    if len(_WORDS.findall(turn.text)) < MIN_WORDS:
        return None
    if turn.role == "ai" and _only_asks(turn.text):
        return None  # "Hello! How are you?": the user's answer carries what is kept
    return f"{'The user' if turn.role == 'user' else 'The character'}: \"{_gist(turn.text)}\""


def summarise(memo: str, turns: Sequence[Turn], max_tokens: int) -> str:
    lines = [x for x in memo.splitlines() if x.strip()]
    lines += [x for x in (line(t) for t in turns) if x is not None]
    kept: list[str] = []
    used = 0
    for x in reversed(lines):  # the newest lines are kept when the memo is over its budget
        cost = approximate_tokens(x) + 1
        if used + cost > max_tokens:
            break
        kept.append(x)
        used += cost
    return "\n".join(reversed(kept))
