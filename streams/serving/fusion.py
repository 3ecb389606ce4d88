"""Reciprocal rank fusion (RRF) of several rankers' rankings into one order.

rrf(d) = sum over the rankers that ranked d of 1 / (k + rank), ranks 1-based. A ranker that did not
rank d contributes nothing. Ties on the fused value are broken by the best single rank d reached in
any ranker (a document some ranker put first beats one that was merely middling everywhere), then by
the document's position in the caller's canonical order (the index keeps entries sorted by id, so:
by entry id). Neither the order of the rankers nor the order the documents arrived in can change the
result: contributions are summed smallest first, whatever ranker they came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# Reciprocal rank fusion's usual k (Cormack et al., 2009); larger k flattens the difference between top ranks.
RRF_K = 60


def fused_order(ranks: Mapping[str, np.ndarray], k: int = RRF_K) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fuse per-ranker rank arrays over the same n documents (0 = not ranked by that ranker).

    Returns (order, rrf, best): the positions of the documents any ranker ranked, best first; the
    fused value of every document; and each document's best single rank (0 if unranked).
    """
    if k < 1:
        raise ValueError(f"RRF k must be >= 1, got {k}")
    arrays = [np.asarray(r, dtype=np.int64) for r in ranks.values()]
    if not arrays:
        return np.empty(0, dtype=np.int64), np.empty(0), np.empty(0, dtype=np.int64)
    stacked = np.stack(arrays)
    contributions = np.where(stacked > 0, 1.0 / (k + np.maximum(stacked, 1)), 0.0)
    contributions.sort(axis=0)  # smallest first, per document: the sum is independent of ranker order
    rrf = contributions[0].copy()
    for row in contributions[1:]:
        rrf += row
    best = np.where(stacked > 0, stacked, np.iinfo(np.int64).max).min(axis=0)
    ranked = np.flatnonzero((stacked > 0).any(axis=0))
    order = ranked[np.lexsort((ranked, best[ranked], -rrf[ranked]))]
    best = np.where(best == np.iinfo(np.int64).max, 0, best)
    return order, rrf, best


@dataclass(frozen=True, slots=True)
class Fused:
    id: str
    rrf: float
    ranks: dict[str, int]


def fuse(rankings: Mapping[str, Sequence[str]], k: int = RRF_K) -> list[Fused]:
    """Fuse rankings given as id lists (best first). The id order of the tie-break is sorted ids; an id
    listed twice by one ranker keeps its first (best) rank."""
    ids = sorted({doc for ranking in rankings.values() for doc in ranking})
    position = {doc: i for i, doc in enumerate(ids)}
    arrays = {}
    for name, ranking in rankings.items():
        array = np.zeros(len(ids), dtype=np.int64)
        for rank, doc in enumerate(ranking, 1):
            if array[position[doc]] == 0:
                array[position[doc]] = rank
        arrays[name] = array
    order, rrf, _ = fused_order(arrays, k)
    return [Fused(ids[i], float(rrf[i]), {n: int(a[i]) for n, a in arrays.items() if a[i] > 0}) for i in order]
