"""One scope's recall index at one entries version: BM25 postings, creation times and (optionally)
unit-length embeddings of its recallable entries. Built once per (scope, version), read by every query.

BM25 is rank-bm25's Okapi variant: the corpus statistics (idf with its epsilon floor, average length,
k1, b) come from `BM25Okapi` itself; the per-document term weights are precomputed into postings so a
query touches only the documents that contain its words. The scores equal `BM25Okapi.get_scores`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np
from rank_bm25 import BM25Okapi

from credence.streams.scope.requests import _words as words  # the Stage-2 pre-rank's tokens
from credence.tables.clock import as_utc
from credence.tables.entries import ARCHIVED, DENIED, Entry

EmbedTexts = Callable[[list[str]], np.ndarray]  # texts -> (n, d) unit vectors


def recallable(entry: Entry) -> bool:
    """Active for recall: not archived (soft-archived included), not invalidated (a meaning superseded),
    not denied by the user, not merged into a persona entry (its content lives on there, so
    recalling both would say the same thing twice)."""
    return (entry.status not in (ARCHIVED, DENIED) and entry.archived_at is None
            and entry.invalidated_at is None and entry.merged_into_id is None)


def document(entry: Entry) -> str:
    """What recall matches against: the entry's subject and text (as the Stage-2 pre-rank does)."""
    return f"{entry.subject} {entry.text}".strip()


def tokens(text: str) -> list[str]:
    return words(text)


@dataclass(frozen=True)
class ScopeIndex:
    version: int
    entries: tuple[Entry, ...]  # recallable entries, sorted by id (the tie-break order)
    times: np.ndarray  # created_at as POSIX seconds, per entry
    idf: Mapping[str, float]
    postings: Mapping[str, tuple[np.ndarray, np.ndarray]]  # term -> (entry positions, BM25 term weights)
    vectors: np.ndarray | None  # (n, d) unit vectors, or None when cosine is off
    vector_versions: Mapping[str, tuple[int, np.ndarray]]  # entry id -> (version, vector), reused next build
    documents: tuple = ()  # (id, indexed text, created_at) per entry: what the structures above depend on

    def __len__(self) -> int:
        return len(self.entries)

    def window(self, since: datetime | None, until: datetime | None) -> np.ndarray:
        """Which entries were created in [since, until)."""
        mask = np.ones(len(self.entries), dtype=bool)
        if since is not None:
            mask &= self.times >= as_utc(since).timestamp()
        if until is not None:
            mask &= self.times < as_utc(until).timestamp()
        return mask

    def bm25_scores(self, query: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(scores of every entry, which entries share at least one query word). Repeated query words
        count again, as in BM25Okapi."""
        scores = np.zeros(len(self.entries))
        matched = np.zeros(len(self.entries), dtype=bool)
        for term in query:
            posting = self.postings.get(term)
            if posting is None:
                continue
            positions, weights = posting
            scores[positions] += self.idf[term] * weights
            matched[positions] = True
        return scores, matched

    def bm25_ranks(self, query: Sequence[str], candidates: np.ndarray) -> np.ndarray:
        """1-based BM25 ranks of the candidates sharing a query word (0 = not ranked). Entries that share
        a word are ranked even when a tiny corpus gives the word no idf; ties go to the lower id."""
        scores, matched = self.bm25_scores(query)
        return _ranks(scores, matched & candidates)

    def cosine_ranks(self, query_vector: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """1-based ranks by cosine similarity, over candidates with a positive similarity (0 = not ranked)."""
        if self.vectors is None or not len(self.entries):
            return np.zeros(len(self.entries), dtype=np.int64)
        similarity = self.vectors @ np.asarray(query_vector, dtype=self.vectors.dtype)
        return _ranks(similarity.astype(np.float64), (similarity > 0) & candidates)


def _ranks(scores: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    positions = np.flatnonzero(eligible)
    order = positions[np.lexsort((positions, -scores[positions]))]
    ranks = np.zeros(len(scores), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def build_index(version: int, entries: Iterable[Entry], embed: EmbedTexts | None = None,
                previous: ScopeIndex | None = None) -> ScopeIndex:
    """The index of the recallable `entries`. With `embed`, only entries whose (id, version) the
    previous index of the scope did not embed are embedded, in one batch."""
    active = tuple(sorted((e for e in entries if recallable(e)), key=lambda e: e.id))
    documents = tuple((e.id, document(e), e.created_at) for e in active)
    if previous is not None and previous.documents == documents and (embed is None) == (previous.vectors is None):
        # Only evidence or usage moved (a recall hit reinforcing its entry is the common case): the
        # BM25 statistics and vectors still hold; the hits report the entries as they are now.
        return replace(previous, version=version, entries=active)
    times = np.array([e.created_at.timestamp() for e in active], dtype=np.float64)
    idf, postings = _bm25(active)
    vectors, kept = None, {}
    if embed is not None:
        vectors, kept = _embeddings(active, embed, previous.vector_versions if previous else {})
    return ScopeIndex(version, active, times, idf, postings, vectors, kept, documents)


def _bm25(active: Sequence[Entry]) -> tuple[dict[str, float], dict[str, tuple[np.ndarray, np.ndarray]]]:
    if not active:
        return {}, {}
    corpus = [tokens(document(e)) or ["_"] for e in active]
    okapi = BM25Okapi(corpus)
    k1, b, avgdl = okapi.k1, okapi.b, okapi.avgdl
    raw: dict[str, tuple[list[int], list[float]]] = {}
    for position, (freqs, length) in enumerate(zip(okapi.doc_freqs, okapi.doc_len)):
        norm = k1 * (1 - b + b * length / avgdl)
        for term, tf in freqs.items():
            positions, weights = raw.setdefault(term, ([], []))
            positions.append(position)
            weights.append(tf * (k1 + 1) / (tf + norm))
    postings = {t: (np.array(p, dtype=np.int64), np.array(w)) for t, (p, w) in raw.items()}
    return dict(okapi.idf), postings


def _embeddings(active: Sequence[Entry], embed: EmbedTexts, cached: Mapping[str, tuple[int, np.ndarray]]
                ) -> tuple[np.ndarray, dict[str, tuple[int, np.ndarray]]]:
    missing = [e for e in active if cached.get(e.id, (None,))[0] != e.version]
    fresh = embed([document(e) for e in missing]) if missing else np.empty((0, 0), dtype=np.float32)
    kept = {e.id: cached[e.id] for e in active if e.id in cached and cached[e.id][0] == e.version}
    for entry, vector in zip(missing, fresh):
        kept[entry.id] = (entry.version, np.asarray(vector, dtype=np.float32))
    if not active:
        return np.empty((0, 0), dtype=np.float32), kept
    return np.stack([kept[e.id][1] for e in active]), kept
