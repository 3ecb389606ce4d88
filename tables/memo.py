"""Memo caches of pure functions over what users said. They hold users' texts in the worker's memory, so a
forget must reach them: `forget_texts` clears every one (recomputing is cheap; telling which keys were the
forgotten user's is not). A cache of anything else (settings, instants) keeps `functools.lru_cache`."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

_CLEARS: list[Callable[[], None]] = []


def text_memo(maxsize: int):
    """`lru_cache(maxsize)` for a pure function of a user's text, cleared by `forget_texts`."""

    def wrap(fn):
        cached = lru_cache(maxsize=maxsize)(fn)
        _CLEARS.append(cached.cache_clear)
        return cached

    return wrap


def register(clear: Callable[[], None]) -> None:
    """Another holder of users' texts (an embedding cache) to be cleared with the rest."""
    _CLEARS.append(clear)


def forget_texts() -> None:
    for clear in list(_CLEARS):
        clear()
