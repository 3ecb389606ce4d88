"""The caches of pure text functions on the step's path: a hit gives what computing again gives, another
key never gets a cached answer, and a cleared (or evicted) entry is computed again the same."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from credence.tables import clock, statement
from credence.tables import text as rules_text

VERDICTS = {
    "The user has two dogs and loves them.": (True, ""),
    "The user loves them.": (False, "dangling_reference"),
    "The user likes my cooking.": (False, "first_person"),
    "The user lives near the.": (False, "cut_off"),
}


def test_gate_verdict_is_cached_per_statement():
    statement._verdict.cache_clear()
    for text, verdict in VERDICTS.items():  # first sight: computed
        assert statement.is_self_contained(text) == verdict
    assert statement._verdict.cache_info().misses == len(VERDICTS)
    for text, verdict in VERDICTS.items():  # again: answered from the cache, each with its own verdict
        assert statement.is_self_contained(text) == verdict == statement._verdict.__wrapped__(text)
    info = statement._verdict.cache_info()
    assert (info.hits, info.misses) == (len(VERDICTS), len(VERDICTS))
    assert statement.is_self_contained(None) == (False, "empty")  # not text: refused before the cache
    assert statement._verdict.cache_info().currsize == len(VERDICTS)


def test_gate_verdict_computed_again_after_the_cache_lets_it_go():
    text = "The user moved to Lisbon and loves it there."
    first = statement.is_self_contained(text)
    statement._verdict.cache_clear()  # as an eviction does: the next ask computes it again
    assert statement.is_self_contained(text) == first == (True, "")
    assert statement._verdict.cache_info().misses == 1
    assert statement._verdict.cache_info().maxsize is not None  # bounded: a long-running worker's memory


def test_polarity_cached_per_text():
    rules_text.polarity_of.cache_clear()
    assert rules_text.polarity_of("The user no longer drinks coffee.") == "negative"
    assert rules_text.polarity_of("The user drinks coffee.") == "positive"  # another key: its own answer
    assert rules_text.polarity_of("The user no longer drinks coffee.") == "negative"
    assert rules_text.polarity_of.cache_info().hits == 1


def test_instant_text_cached_and_the_same_in_any_zone():
    clock._iso.cache_clear()
    utc = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    paris = utc.astimezone(timezone(timedelta(hours=1)))
    naive = datetime(2026, 3, 2, 12, 0)  # taken as UTC, and not equal to the aware ones: a key of its own
    assert clock.format_instant(paris) == "2026-03-02T12:00:00+00:00"
    assert clock.format_instant(utc) == "2026-03-02T12:00:00+00:00"  # the equal instant's entry: same text
    assert clock.format_instant(naive) == "2026-03-02T12:00:00+00:00"
    assert clock.format_instant(utc + timedelta(microseconds=1)) == "2026-03-02T12:00:00.000001+00:00"
    info = clock._iso.cache_info()
    assert (info.hits, info.misses) == (1, 3)
    assert clock.format_instant(None) is None
