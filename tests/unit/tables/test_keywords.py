"""The keyword hooks (tables/keywords.py): one normalisation of a turn's text serves every hook and matches
exactly what the step matched before, when it normalised the text character by character per hook."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from credence.config.memory import DEFAULT_FORGET_KEYWORDS, DEFAULT_NEGATIVE_KEYWORDS
from credence.tables import keywords
from credence.tables.keywords import KeywordText

HOOKS = (DEFAULT_NEGATIVE_KEYWORDS, DEFAULT_FORGET_KEYWORDS)


def reference(text: str, keywords: dict[str, list[str]]) -> bool:
    """The step's check before the one normalisation (streams/scope/step.py `_has_keyword`, a955ea1)."""
    padded = f" {' '.join(''.join(c.lower() if c.isalnum() or c == chr(39) else ' ' for c in text).split())} "
    for words in keywords.values():
        for word in words:
            w = word.lower()
            if (f" {w} " in padded) if w.isascii() else (w in text.lower()):
                return True
    return False


# Words of the hooks, their neighbours in other scripts and the characters the normalisation treats apart.
PIECES = st.sampled_from(["no", "not", "Never", "FORGET", "forgetful", "don't", "don’t", "c'est faux", "olvídate",
                          "不对", "もう", "아니", "nicht mehr", "ya no", "snake_case", "İstanbul", "ΟΔΟΣ", "Kelvin K",
                          "no.", "(not)", "x", "1", "_", "'", "-", " ", "\t", "!", "？", "é", "ß"])
TEXTS = st.lists(st.one_of(PIECES, st.text(max_size=6)), max_size=8).map("".join)


@settings(max_examples=60, deadline=None)
@given(TEXTS)
def test_one_normalisation_matches_the_per_hook_one(text):
    said = KeywordText.of(text)
    for hook in HOOKS:
        assert said.has_any(hook) == reference(text, hook), (text, hook)


def test_examples():
    assert KeywordText.of("Please FORGET that, ok?").has_any(DEFAULT_FORGET_KEYWORDS)
    assert not KeywordText.of("I'm so forgetful").has_any(DEFAULT_FORGET_KEYWORDS)  # whole words only
    assert KeywordText.of("snake_case no").has_any(DEFAULT_NEGATIVE_KEYWORDS)  # "_" breaks words
    assert KeywordText.of("Ah, c'est faux !").has_any(DEFAULT_NEGATIVE_KEYWORDS)  # the apostrophe is kept
    assert KeywordText.of("それ不对吧").has_any(DEFAULT_NEGATIVE_KEYWORDS)  # no spaces in CJK: anywhere
    assert not KeywordText.of("I love tea").has_any(DEFAULT_NEGATIVE_KEYWORDS)


def test_every_ascii_character_breaks_words_or_not_as_before():
    for c in map(chr, range(128)):  # the ASCII path's table against the per-character rule
        for text in (f"no{c}x", f"x{c}no", f"don{c}t", f"{c}forget{c}"):
            for hook in HOOKS:
                assert KeywordText.of(text).has_any(hook) == reference(text, hook), (text, hook)


def test_patterns_cached_per_keyword_set_and_built_again_when_the_words_change():
    keywords._patterns.cache_clear()
    hook = {"en": ["stop"], "ja": ["やめて"]}
    said = KeywordText.of("Please STOP, やめて")
    assert said.has_any(hook) and said.has_any(hook)
    assert keywords._patterns.cache_info().hits == 1  # the same words: the patterns built once
    hook["en"], hook["ja"] = ["halt"], []  # settings with other words: their own patterns, no stale answer
    assert not said.has_any(hook)
    assert KeywordText.of("halt now").has_any(hook)
    assert not KeywordText.of("anything").has_any({"en": []})  # no words: nothing matches
    assert keywords._patterns.cache_info().misses == 3
