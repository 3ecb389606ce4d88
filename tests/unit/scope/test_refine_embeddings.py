"""Refinement clusters with embeddings on ("embeddings when on, the lexical measure
otherwise"): a paraphrase that shares no content word with its twin clusters by cosine similarity, of the
same polarity only, above memory.refine_cluster_cosine only; vectors are embedded text by text, so a
re-run pass asks about the same clusters (the real model: tests/unit/serving/test_recall_cosine.py)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np

from credence.config.memory import MemorySettings
from credence.streams.llm import embeddings
from credence.streams.scope import refine
from credence.streams.scope.context import StepContext
from credence.streams.scope.tasks import TaskName
from credence.tables.entries import new_persona_entry
from credence.tables.scope import Scope
from tests.unit.scope.conftest import T0

S = Scope("acme", "u1", "aria")
NURSE, HOSPITAL = "The user works as a nurse.", "The user is employed in a hospital caring for patients."
NOT_NURSE = "The user does not work as a nurse."
HIKING, REX = "The user loves hiking.", "The user has a dog named Rex."


class TableEncoder:
    """Fixed unit vectors per text (a pure function of the text): the cosine of two texts is exact."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = {t: np.asarray(v, dtype=np.float64) / np.linalg.norm(v) for t, v in vectors.items()}
        self.batches: list[list[str]] = []

    def __call__(self, texts):
        self.batches.append(list(texts))
        return np.stack([self.vectors[t] for t in texts])


def _state(driver_factory, texts: dict[str, str]):
    d = driver_factory()
    for eid, text in texts.items():
        d.state.entries[eid] = new_persona_entry(eid, S, text, T0)
    return d


def _ids(d, encode, memory: MemorySettings | None = None) -> list[list[str]]:
    vectors = embeddings.TextVectors(encode) if encode is not None else None
    ctx = StepContext(now=T0, powerful=True, boot="b", memory=memory or d.memory, pipeline=d.pipeline, vectors=vectors)
    return [[e.id for e in c] for c in refine.clusters(d.state, ctx)]


ENTRIES = {"a-nurse": NURSE, "b-hospital": HOSPITAL, "c-not": NOT_NURSE, "d-hike": HIKING, "e-rex": REX}


def test_a_paraphrase_clusters_by_cosine_with_embeddings_on_and_not_lexically(driver_factory):
    encoder = TableEncoder({NURSE: [1, 0.2, 0], HOSPITAL: [1, 0.5, 0], NOT_NURSE: [1, 0.1, 0],
                            HIKING: [0, 0, 1], REX: [0, 1, 0.3]})
    d = _state(driver_factory, ENTRIES)
    assert _ids(d, None) == []  # lexically: no two of them restate each other
    # cos(nurse, hospital) ~0.96; the negation is as close but of the other polarity: never in the cluster
    assert _ids(d, encoder) == [["a-nurse", "b-hospital"]]
    assert _ids(d, encoder, MemorySettings(refine_cluster_cosine=0.99)) == []  # below the threshold: apart


def test_a_pass_with_embeddings_asks_the_paraphrase_cluster(driver_factory):
    encoder = TableEncoder({NURSE: [1, 0.2, 0], HOSPITAL: [1, 0.5, 0], NOT_NURSE: [1, 0.1, 0],
                            HIKING: [0, 0, 1], REX: [0, 1, 0.3]})
    d = _state(driver_factory, ENTRIES)
    ctx = StepContext(now=T0, powerful=True, boot="b", memory=d.memory, pipeline=d.pipeline,
                      vectors=embeddings.TextVectors(encoder))
    d.state.last_refine_at = T0 - timedelta(hours=1)
    refine.ask(d.state, ctx)
    [req] = [r for r in ctx.requests if r.task == TaskName.REFINE]
    assert sorted(req.payload["versions"]) == ["a-nurse", "b-hospital"]


def test_vectors_are_embedded_text_by_text_cached_and_bounded():
    encoder = TableEncoder({NURSE: [1, 0.2, 0], HOSPITAL: [1, 0.5, 0], NOT_NURSE: [1, 0.1, 0],
                            HIKING: [0, 0, 1], REX: [0, 1, 0.3]})
    vectors = embeddings.TextVectors(encoder, kept=4)
    first = vectors([NURSE, HOSPITAL, NURSE])
    assert encoder.batches == [[NURSE], [HOSPITAL]]  # alone: a vector never depends on its batch-mates
    assert np.allclose(first[0], first[2]) and not np.allclose(first[0], first[1])
    vectors([HOSPITAL, NURSE])
    assert len(encoder.batches) == 2  # cached: nothing embedded again
    vectors([NOT_NURSE, HIKING, REX])
    assert len(vectors._cache) == 4 and HOSPITAL not in vectors._cache  # the least recently used went first
    assert embeddings.text_vectors(encoder) is embeddings.text_vectors(encoder)  # one cache per encoder
    assert embeddings.text_vectors(None) is None


# The real all-MiniLM-L6-v2 model's check is in tests/unit/serving/test_recall_cosine.py, beside the
# other real-model tests: one module, so the model is loaded once per test process (CI's loadscope).
