"""Explicit memory recall (the seed's "BM25, optional cosine similarity, time filtering, and RRF").

A query is answered over the scope's recallable entries (index.recallable): BM25 over the entry's subject
and text, cosine similarity of sentence embeddings when an encoder is configured, the time filter
``since <= created_at < until``, and reciprocal rank fusion (fusion.py, k = 60). Ties go to the best
single rank, then the lower entry id. The per-scope index is built once per (scope, entries version) and
kept in a bounded LRU; embeddings are kept per entry version across builds.

Why created_at and not updated_at, and the cache: docs/operations/observability.md ("Recall").
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from credence.config.memory import MemorySettings
from credence.errors import CredenceError
from credence.streams.llm.embeddings import Encode
from credence.streams.serving.fusion import RRF_K, fused_order
from credence.streams.serving.index import ScopeIndex, build_index, tokens
from credence.tables.clock import as_utc
from credence.tables.entries import Entry
from credence.tables.evidence import derived_tier

log = logging.getLogger(__name__)

LOAD_RETRY_SECONDS = 30.0  # a failed background load of the model is tried again after this long
CACHE_SCOPES = 1024  # scope indexes kept per worker (least recently used dropped first)
MAX_TOP_K = 100


class RecallError(CredenceError, ValueError):
    """A recall request that cannot be answered as asked (the HTTP layer answers 422 with the message)."""


@dataclass(frozen=True, slots=True)
class RecallHit:
    id: str
    text: str
    kind: str
    tier: str  # derived tier at `now`, or "protected" for character-card entries
    score: float  # evidence score at `now` (+inf for protected entries: JSON renders it as null)
    rrf: float
    rankers: dict[str, int]  # ranker name ("bm25", "cosine") -> 1-based rank; absent = not ranked

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "kind": self.kind, "tier": self.tier,
                "score": self.score if math.isfinite(self.score) else None, "rrf": self.rrf,
                "rankers": dict(self.rankers)}


class RecallService:
    """Recall over scopes' entries with a per-(scope, version) index cache. Thread-safe: `asearch` runs
    a query (and any index build or embedding it needs) in a worker thread, off the event loop."""

    def __init__(self, encoder: Encode | None = None, rrf_k: int = RRF_K, cache_scopes: int = CACHE_SCOPES):
        if rrf_k < 1 or cache_scopes < 1:
            raise RecallError(f"rrf_k and cache_scopes must be >= 1, got {rrf_k} and {cache_scopes}")
        self._encode = encoder
        self.rrf_k = rrf_k
        self._cache: OrderedDict[str, ScopeIndex] = OrderedDict()
        self._cache_scopes = cache_scopes
        self._lock = threading.Lock()
        self._loading: threading.Thread | None = None
        self._next_load = 0.0  # monotonic time before which no new background load starts
        self.builds = 0  # index builds since start (tests and /metrics read it)
        self.embedded = 0  # entry texts embedded since start

    @property
    def encoder(self) -> Encode | None:
        return self._encode

    @property
    def cosine_enabled(self) -> bool:
        return self._encode is not None

    @property
    def cosine_ready(self) -> bool:
        """Whether cosine can rank now. An encoder whose model is still loading (a LazyEncoder at start:
        ~16 s on a loaded host) is loaded in the background, and recall answers by BM25 alone meanwhile
        instead of waiting for it."""
        if self._encode is None:
            return False
        if getattr(self._encode, "loaded", True):
            return True
        with self._lock:
            # One load at a time, and after a failed one not again for a while (each failure logs a traceback).
            now = time.monotonic()
            if (self._loading is None or not self._loading.is_alive()) and now >= self._next_load:
                self._next_load = now + LOAD_RETRY_SECONDS
                self._loading = threading.Thread(target=_load, args=(self._encode,), name="recall-model", daemon=True)
                self._loading.start()
        return False

    def answer(self, scope: str, version: int, entries: Sequence[Entry], now: datetime, query: str,
               top_k: int, since: datetime | None, until: datetime | None, memory: MemorySettings
               ) -> tuple[list[RecallHit], list[str]]:
        """The top_k entries for `query`, best first, and the rankers fused ("bm25", + "cosine" once its
        model is loaded). `version` must change whenever `entries` change (the scope store's entries
        version): the cached index is trusted for an unchanged version."""
        _check(query, top_k, since, until)
        index = self.index(scope, version, entries, self.cosine_ready)
        candidates = index.window(since, until)
        ranks = {"bm25": index.bm25_ranks(tokens(query), candidates)}
        if index.vectors is not None:
            ranks["cosine"] = index.cosine_ranks(self._embed([query])[0], candidates)
        order, rrf, _ = fused_order(ranks, self.rrf_k)
        return [_hit(index.entries[i], float(rrf[i]), {n: int(r[i]) for n, r in ranks.items() if r[i] > 0},
                     now, memory) for i in order[:top_k]], list(ranks)

    def search(self, *args, **kwargs) -> list[RecallHit]:
        return self.answer(*args, **kwargs)[0]

    async def asearch(self, *args, **kwargs) -> list[RecallHit]:
        return await asyncio.to_thread(self.search, *args, **kwargs)

    async def aanswer(self, *args, **kwargs) -> tuple[list[RecallHit], list[str]]:
        return await asyncio.to_thread(self.answer, *args, **kwargs)

    def index(self, scope: str, version: int, entries: Sequence[Entry], cosine: bool | None = None) -> ScopeIndex:
        """The scope's index at `version` (with vectors when `cosine`, by default when there is an encoder),
        built (and embedded) only on a miss."""
        cosine = self._encode is not None if cosine is None else cosine
        with self._lock:
            cached = self._cache.get(scope)
            if cached is not None and cached.version == version and (cached.vectors is not None) == cosine:
                self._cache.move_to_end(scope)
                return cached
        # Built outside the lock: embedding a large scope must not hold up other scopes' queries. Two
        # threads missing the same version at once both build it; either result is the same index.
        index = build_index(version, entries, self._embed_entries if cosine else None, cached)
        with self._lock:
            self.builds += 1
            current = self._cache.get(scope)
            if current is None or current.version <= version or current is cached:
                self._cache[scope] = index
            self._cache.move_to_end(scope)
            while len(self._cache) > self._cache_scopes:
                self._cache.popitem(last=False)
        return index

    def forget(self, scope: str) -> None:
        """Drop a scope's index (right to be forgotten: no copy of its texts or vectors stays here)."""
        with self._lock:
            self._cache.pop(scope, None)

    def _embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._encode(texts), dtype=np.float32)

    def _embed_entries(self, texts: list[str]) -> np.ndarray:
        self.embedded += len(texts)
        return self._embed(texts)


def _load(encoder) -> None:
    try:
        encoder.load()
    except Exception:  # noqa: BLE001 - recall goes on by BM25; the next recall tries again
        log.exception("loading recall's embedding model failed; recall answers by BM25 until it loads")


def _check(query: str, top_k: int, since: datetime | None, until: datetime | None) -> None:
    if not isinstance(query, str) or not query.strip():
        raise RecallError("query must be a non-empty string")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise RecallError(f"top_k must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
    if since is not None and until is not None and as_utc(since) >= as_utc(until):
        raise RecallError(f"since ({since.isoformat()}) must be before until ({until.isoformat()})")


def _hit(entry: Entry, rrf: float, rankers: dict[str, int], now: datetime, memory: MemorySettings) -> RecallHit:
    score = entry.score(now, settings=memory)
    tier = "protected" if entry.protected else derived_tier(score, settings=memory)
    return RecallHit(entry.id, entry.text, entry.kind, tier, score, rrf, rankers)
