"""Properties of reciprocal rank fusion and of the cached BM25 scorer."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from credence.streams.serving.fusion import fuse
from credence.streams.serving.index import build_index
from tests.unit.serving.conftest import make_entry

IDS = [f"e{i}" for i in range(12)]
rankings = st.dictionaries(
    st.sampled_from(["bm25", "cosine", "third"]),
    st.lists(st.sampled_from(IDS), unique=True, max_size=12),
    min_size=1, max_size=3,
)


def as_tuples(fused):
    return [(f.id, f.rrf, f.ranks) for f in fused]


@given(rankings, st.randoms())
def test_the_order_of_the_rankers_does_not_matter(ranks, rnd):
    names = list(ranks)
    rnd.shuffle(names)
    assert as_tuples(fuse({n: ranks[n] for n in names})) == as_tuples(fuse(ranks))


@given(rankings)
def test_every_ranked_document_appears_once_best_first(ranks):
    fused = fuse(ranks)
    assert sorted(f.id for f in fused) == sorted({d for r in ranks.values() for d in r})
    values = [f.rrf for f in fused]
    assert values == sorted(values, reverse=True)
    for f in fused:
        assert f.rrf == sum(sorted(1 / (60 + r) for r in f.ranks.values()))


@given(rankings, st.data())
def test_moving_a_document_up_in_one_ranking_never_moves_it_down(ranks, data):
    name = data.draw(st.sampled_from(sorted(ranks)))
    ranking = ranks[name]
    if len(ranking) < 2:
        return
    i = data.draw(st.integers(1, len(ranking) - 1))
    doc = ranking[i]
    better = ranking[:i - 1] + [doc, ranking[i - 1]] + ranking[i + 1:]
    before = [f.id for f in fuse(ranks)]
    after_fused = fuse(ranks | {name: better})
    after = [f.id for f in after_fused]
    assert after.index(doc) <= before.index(doc)
    assert {f.id: f.rrf for f in after_fused}[doc] > {f.id: f.rrf for f in fuse(ranks)}[doc]


@given(rankings)
def test_a_document_every_ranker_puts_first_wins(ranks):
    top = "winner"
    fused = fuse({n: [top] + [d for d in r if d != top] for n, r in ranks.items()})
    assert fused[0].id == top and set(fused[0].ranks.values()) == {1}


def test_symmetric_ties_go_to_the_best_single_rank_then_the_id():
    fused = fuse({"bm25": ["b", "a", "c"], "cosine": ["a", "b", "d"]})
    assert [f.id for f in fused] == ["a", "b", "c", "d"]  # a, b tie exactly; c, d tie exactly
    assert fused[0].rrf == fused[1].rrf and fused[2].rrf == fused[3].rrf


WORDS = ["tea", "coffee", "rust", "lisbon", "chess", "piano", "cat", "river", "green", "morning"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1, max_size=15),
       st.lists(st.sampled_from(WORDS + ["absent"]), min_size=1, max_size=4))
def test_cached_bm25_scores_equal_bm25okapi_rebuilt(docs, query):
    entries = [make_entry(f"e{i:02d}", "reflection", " ".join(d)) for i, d in enumerate(docs)]
    index = build_index(1, entries)
    scores, _ = index.bm25_scores(query)
    expected = BM25Okapi([d for d in docs]).get_scores(query)
    assert np.array_equal(scores, expected)
