"""RecallService: BM25 ranking, time filter, active entries only, stable ties, the per-version cache."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta

import pytest

from credence.config.memory import MemorySettings
from credence.streams.serving.recall import RecallError, RecallService
from tests.unit.serving.conftest import SCOPE, T0, confirmed, make_entry

MEMORY = MemorySettings()
KEY = SCOPE.key


def search(service, entries, query, now, top_k=10, since=None, until=None, version=1):
    return service.search(KEY, version, entries, now, query, top_k, since, until, MEMORY)


def test_bm25_only_ranks_the_entries_sharing_the_query_words(corpus, now):
    service = RecallService()
    assert not service.cosine_enabled
    hits = search(service, corpus, "Does she like green tea or coffee?", now)
    # "green" and "tea" both match p-tea; only "coffee" matches r-coffee; nothing else shares a word.
    assert [h.id for h in hits] == ["p-tea", "r-coffee"]
    assert [h.rankers for h in hits] == [{"bm25": 1}, {"bm25": 2}]
    assert hits[0].rrf == pytest.approx(1 / 61) and hits[1].rrf == pytest.approx(1 / 62)
    assert hits[0].text == "drinks green tea every morning" and hits[0].kind == "persona"
    # A word many entries share ("the") still ranks them, below the entries matching the rare words.
    ids = [h.id for h in search(service, corpus, "the green tea", now)]
    assert ids[0] == "p-tea" and set(ids[1:]) == {"p-rust", "r-lisbon", "r-hike"}


def test_hits_carry_the_score_and_tier_at_now(corpus, now):
    corpus[0] = confirmed(corpus[0], at=now)
    hit = search(RecallService(), corpus, "green tea", now)[0]
    assert (hit.id, hit.score, hit.tier) == ("p-tea", 1.5, "confirmed")
    later = search(RecallService(), corpus, "green tea", now + timedelta(days=30))[0]
    assert later.score == pytest.approx(0.75) and later.tier == "pending"  # decayed by one half-life


def test_archived_denied_merged_and_invalidated_entries_are_not_recalled(corpus, now):
    corpus += [make_entry("r-tea-old", "reflection", "drinks tea", status="archived"),
               make_entry("r-tea-no", "reflection", "hates tea", status="denied"),
               make_entry("r-tea-merged", "reflection", "likes tea", status="promoted", merged_into_id="p-tea"),
               make_entry("r-tea-was", "reflection", "liked tea once", invalidated_at=T0)]
    assert [h.id for h in search(RecallService(), corpus, "tea", now)] == ["p-tea"]


def test_time_filter_keeps_entries_created_in_since_until(corpus, now):
    service = RecallService()
    query = "tea Rust Lisbon hiking coffee"
    everything = {h.id for h in search(service, corpus, query, now)}
    assert everything == {"p-tea", "p-rust", "r-lisbon", "r-hike", "r-coffee"}
    window = search(service, corpus, query, now, since=T0 + timedelta(days=1), until=T0 + timedelta(days=3))
    assert {h.id for h in window} == {"p-rust", "r-lisbon"}  # day 3 is excluded: until is exclusive
    assert {h.id for h in search(service, corpus, query, now, since=T0 + timedelta(days=4))} == {"r-coffee"}
    assert {h.id for h in search(service, corpus, query, now, until=T0 + timedelta(hours=1))} == {"p-tea"}
    # created_at decides, not the last update: a signal yesterday does not make day 0 recent.
    corpus[0] = replace(corpus[0], updated_at=now, version=2)
    assert "p-tea" not in {h.id for h in search(service, corpus, query, now, since=T0 + timedelta(days=1),
                                                version=2)}


def test_top_k_cuts_the_fused_list(corpus, now):
    hits = search(RecallService(), corpus, "tea Rust Lisbon hiking coffee", now, top_k=2)
    assert len(hits) == 2


def test_ties_go_to_the_lower_id_whatever_the_input_order(now):
    # Same words, same length: identical BM25 scores, so the rank (and the fused value) ties on id.
    entries = [make_entry(f"r-{c}", "reflection", "plays chess online") for c in "dbeac"]
    expected = ["r-a", "r-b", "r-c", "r-d", "r-e"]
    for seed in range(5):
        shuffled = entries[:]
        random.Random(seed).shuffle(shuffled)
        hits = search(RecallService(), shuffled, "chess", now)
        assert [h.id for h in hits] == expected
        assert [h.rankers["bm25"] for h in hits] == [1, 2, 3, 4, 5]


def test_the_index_is_built_once_per_scope_version(corpus, now):
    service = RecallService()
    for query in ("tea", "Rust", "hiking", "tea"):
        search(service, corpus, query, now)
    assert service.builds == 1
    corpus.append(make_entry("r-tea2", "reflection", "orders tea at cafes"))
    assert [h.id for h in search(service, corpus, "cafes", now, version=2)] == ["r-tea2"]
    search(service, corpus, "tea", now, version=2)
    assert service.builds == 2
    # The cached index is trusted for its version: entries passed with an old version are not re-read.
    assert search(service, corpus[:1], "cafes", now, version=2)[0].id == "r-tea2"


def test_the_cache_is_bounded(corpus, now):
    service = RecallService(cache_scopes=2)
    for scope in ("t/u/a", "t/u/b", "t/u/c", "t/u/a"):
        service.search(scope, 1, corpus, now, "tea", 5, None, None, MEMORY)
    assert service.builds == 4  # t/u/a was dropped when t/u/c came in, and rebuilt


def test_an_empty_scope_or_a_query_without_words_recalls_nothing(corpus, now):
    assert search(RecallService(), [], "tea", now) == []
    assert search(RecallService(), corpus, "?? !!", now) == []


@pytest.mark.parametrize("query, top_k, since, until", [
    ("", 5, None, None), ("   ", 5, None, None), ("tea", 0, None, None), ("tea", 101, None, None),
    ("tea", True, None, None), ("tea", 5, T0, T0), ("tea", 5, T0 + timedelta(days=1), T0),
])
def test_bad_requests_say_why(corpus, now, query, top_k, since, until):
    with pytest.raises(RecallError):
        search(RecallService(), corpus, query, now, top_k=top_k, since=since, until=until)


def test_a_new_version_with_the_same_texts_reuses_the_statistics_and_reports_fresh_entries(corpus, now):
    service = RecallService()
    search(service, corpus, "green tea", now, version=1)
    built = service.index(KEY, 1, corpus)
    # a recall hit reinforcing its entry: a new version, the same documents
    corpus[0] = confirmed(corpus[0], at=now)
    hit = search(service, corpus, "green tea", now, version=2)[0]
    reused = service.index(KEY, 2, corpus)
    assert reused.postings is built.postings and reused.version == 2
    assert (hit.id, hit.score, hit.tier) == ("p-tea", 1.5, "confirmed")  # the entry as it is now
    # a changed text is a new document: rebuilt, and found by its new words
    corpus[0] = replace(corpus[0], text="drinks black coffee every morning")
    ids = [h.id for h in search(service, corpus, "black coffee", now, version=3)]
    assert service.index(KEY, 3, corpus).postings is not built.postings and ids[0] == "p-tea"
    assert search(service, corpus, "green tea", now, version=3) == []
