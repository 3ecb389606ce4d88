"""Which scopes this worker holds now: a scope belongs to the partition its key hashes to (the producer's
default partitioner, the same for every co-partitioned topic), and the worker holds the partitions Kafka
assigned it. Busy counts, ticks and the scan for unfinished work follow the partitions as they move."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from aiokafka.partitioner import DefaultPartitioner

log = logging.getLogger(__name__)


class Ownership:
    def __init__(self, partitions: int, source_topic: str) -> None:
        self._all = list(range(partitions))
        self._partitioner = DefaultPartitioner()
        self._partition_cache: dict[str, int] = {}
        self._source = source_topic  # one of the co-partitioned input topics stands for all of them
        self.held: set[int] = set()
        self.unscanned: set[int] = set()  # assigned partitions not yet scanned for unfinished work
        self.busy: set[str] = set()  # held scopes with work in flight, queued or buffered
        # held partition -> the assignment it came with: a partition lost and assigned again has a new one
        self.tenure: dict[int, int] = {}
        self._assignments = 0
        self._on_moved: list[Callable[[set[int]], None]] = []

    def partition_of(self, scope: str) -> int:
        partition = self._partition_cache.get(scope)
        if partition is None:  # murmur2 in Python: worth remembering for the scopes this worker sees
            if len(self._partition_cache) >= 1 << 16:
                self._partition_cache.clear()
            partition = self._partition_cache[scope] = self._partitioner(scope.encode(), self._all, self._all)
        return partition

    def owns(self, scope: str) -> bool:
        return self.partition_of(scope) in self.held

    def on_moved(self, callback: Callable[[set[int]], None]) -> None:
        """`callback(partitions)` runs for partitions revoked or newly assigned."""
        self._on_moved.append(callback)

    def mark(self, scope: str, idle: bool) -> None:
        self.busy.discard(scope) if idle else self.busy.add(scope)

    def revoked(self, tps: Iterable) -> None:
        self._drop({tp.partition for tp in tps if tp.topic == self._source})

    def assigned(self, tps: Iterable) -> None:
        """`tps`: the worker's whole assignment after a rebalance."""
        now = {tp.partition for tp in tps if tp.topic == self._source}
        self._drop(self.held - now)
        new = now - self.held
        if not new:
            return
        self.held |= new
        self._assignments += 1
        self.tenure.update(dict.fromkeys(new, self._assignments))
        self.unscanned |= new
        self._moved(new)
        log.info("partitions assigned: %s (holding %s)", sorted(new), sorted(self.held))

    def _drop(self, gone: set[int]) -> None:
        gone &= self.held
        if not gone:
            return
        self.held -= gone
        self.tenure = {p: t for p, t in self.tenure.items() if p not in gone}
        self.unscanned -= gone
        self.busy = {s for s in self.busy if self.partition_of(s) not in gone}
        self._moved(gone)
        log.info("partitions revoked: %s (holding %s)", sorted(gone), sorted(self.held))

    def _moved(self, partitions: set[int]) -> None:
        for callback in self._on_moved:
            callback(partitions)
