"""A forget reaches the memo caches of users' texts: every one is cleared, and no other cache of the package
is keyed by what a user said (a new one must use `text_memo`)."""

from __future__ import annotations

import re
from pathlib import Path

from credence.streams.llm.embeddings import TextVectors
from credence.streams.scope.requests import _word_tuple
from credence.tables.memo import forget_texts
from credence.tables.mentions import content_words
from credence.tables.statement import _verdict, is_self_contained
from credence.tables.text import content_stems, normalise_subject, polarity_of, restatement_stems

TEXT_CACHES = (_verdict, content_words, content_stems, normalise_subject, polarity_of, restatement_stems,
               _word_tuple)
# caches of settings, instants and models, never of a user's words
OTHER_CACHES = {"tables/clock.py", "tables/keywords.py", "tables/tokens.py", "streams/llm/prompts/base.py"}
ROOT = Path(__file__).resolve().parents[3]


def test_a_forget_clears_every_cache_of_users_texts():
    is_self_contained("The user has a dog named Rex.")
    for cached, text in zip(TEXT_CACHES, ["The user has a dog named Rex."] * 7, strict=True):
        cached(text)
    vectors = TextVectors(lambda texts: [[float(len(t))] for t in texts])
    vectors(["The user has a dog named Rex."])
    assert all(c.cache_info().currsize for c in TEXT_CACHES) and vectors._cache
    forget_texts()
    assert [c.__name__ for c in TEXT_CACHES if c.cache_info().currsize] == []
    assert not vectors._cache


def test_no_other_module_caches_with_a_bare_lru_cache():
    bare = re.compile(r"^@(functools\.)?(lru_cache|cache)\b", re.M)
    found = {str(p.relative_to(ROOT)) for folder in ("tables", "streams", "sinks", "config", "credence")
             if (ROOT / folder).is_dir() for p in (ROOT / folder).rglob("*.py") if bare.search(p.read_text())}
    assert found <= OTHER_CACHES, f"a cache outside tables/memo.py (users' texts must be forgettable): {found - OTHER_CACHES}"
