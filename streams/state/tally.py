"""Counts over every scope a worker holds, for probes polled often (/status, /metrics)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from credence.streams.scope.scope_state import ScopeState
from credence.streams.state.store import ScopeStore


class Tally:
    """A count over every scope held (reflections by status for /status, tiers for /metrics), kept per
    scope and counted again only for the scopes whose entries, turns or clock moved since the last call:
    a probe polled on a worker holding 100,000 entries reads only what changed."""

    def __init__(self, store: ScopeStore, count: Callable[[ScopeState], Counter]) -> None:
        self._store, self._count = store, count
        self._kept: dict[str, tuple[tuple, Counter]] = {}

    def __call__(self) -> Counter:
        kept = {}
        for scope, stamp, state in self._store.changed({s: k[0] for s, k in self._kept.items()}):
            kept[scope] = (stamp, self._count(state) if state is not None else self._kept[scope][1])
        self._kept = kept  # scopes gone (forgotten, moved away) drop out
        total: Counter = Counter()
        for _stamp, counts in kept.values():
            total.update(counts)
        return total
