"""Duplicate marks, bounded by when their records reached Kafka.

A turn or feedback record repeated with the same id in a scope (a producer retry, a replayed file) is
dropped. Its mark — `kind\\x1fscope\\x1fid` -> the position of the record that first carried it and its
time — lives in the `seen` table while that time is within `seen_horizon_days` of the newest mark time
this worker saw on the partition; older marks are deleted, so the table holds a horizon's worth of ids,
not one per turn forever. A duplicate older than the horizon is applied again (its turn counts twice);
marks written before this layout carry no time and go at the partition's first prune.

A mark's time is when its record reached Kafka (its Kafka timestamp, set by the platform's producer or,
with `message.timestamp.type=LogAppendTime`, the broker), never the event time the record claims. Event
times come from the tenants' clients: one turn dated 2090 would move the partition's horizon decades ahead
and prune every tenant's marks on it, and a turn dated months back (a tenant importing history, an offline
client syncing) would be pruned in the batch that wrote it, so its retry seconds later would count twice.
By ingestion, every mark is kept a horizon from when its record came, whatever its date. Only a record
without a Kafka timestamp (message format v0) is kept by its event time.

Not a horizon per scope: a scope that goes quiet would keep its marks for ever (the table would grow with
every scope ever seen), and pruning them would take a clock outside the records. Here the prune depends
only on the partition's records, in order (a Kafka timestamp is part of the record).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import UTC, datetime

from credence.streams.state import codec
from credence.streams.state.forgets import is_forget_key
from credence.streams.state.positions import is_position_key
from credence.streams.state.redo import is_redo_key
from credence.streams.state.writes import TableWrites
from credence.tables.clock import format_instant, parse_instant

NO_TIME = float("-inf")


def mark_key(kind: str, scope: str, ident: str) -> str:
    return f"{kind}{codec.SEP}{scope}{codec.SEP}{ident}"


def _seconds(at: str | None) -> float:
    parsed = parse_instant(at)
    return parsed.timestamp() if parsed else NO_TIME


def received_at(message) -> datetime | None:
    """The input record's Kafka timestamp (Faust's `Message.timestamp`, seconds); None when it has none
    (message format v0 records carry -1)."""
    seconds = getattr(message, "timestamp", None)
    return datetime.fromtimestamp(seconds, UTC) if seconds is not None and seconds > 0 else None


def mark_time(at: datetime | None, received: datetime | None) -> datetime | None:
    """The time a mark is kept by: when its record reached Kafka; the record's event time only when it
    has no Kafka timestamp."""
    return received or at


class Marks:
    def __init__(self, table, horizon_days: float, partition_of: Callable[[str], int], writes: TableWrites) -> None:
        self._table = table
        self._writes = writes
        self._horizon = horizon_days * 86_400.0
        self._partition_of = partition_of
        self._pending: dict[str, tuple[str, str | None, int]] = {}  # this batch's new marks (+ partition)
        self._heaps: dict[int, list[tuple[float, str]]] | None = None  # per partition, oldest first
        self._newest: dict[int, float] = {}

    def first_time(self, kind: str, scope: str, ident: str, position: str, at: datetime | None,
                   received: datetime | None = None) -> bool:
        """False for a duplicate. The mark holds the record's own position, so the record itself,
        redelivered after a crash that saved the mark but not the scope, is still applied. `at` is the
        record's event time, `received` its Kafka timestamp (see the module's docstring)."""
        key = mark_key(kind, scope, ident)
        mark = self._pending.get(key) or codec.decode_mark(self._table.get(key))
        if mark:
            return mark[0] == position
        self._pending[key] = (position, format_instant(mark_time(at, received)), self._partition_of(scope))
        return True

    def write(self, partition: int) -> None:
        """Write this batch's marks of `partition` (a record of it is the current event), then delete
        the partition's marks that fell behind the horizon."""
        heaps = self._heaps_now()
        heap = heaps.setdefault(partition, [])
        for key in [k for k, pending in self._pending.items() if pending[2] == partition]:
            position, at, _ = self._pending.pop(key)
            self._writes.put(self._table, key, codec.encode_mark(position, at), partition)
            self._push(partition, _seconds(at), key)
        cutoff = self._newest.get(partition, NO_TIME) - self._horizon
        while heap and heap[0][0] < cutoff:
            _, key = heapq.heappop(heap)
            self._writes.delete(self._table, key, partition)

    def discard_pending(self) -> None:
        self._pending.clear()

    def forget(self, prefix: str, partition: int) -> int:
        doomed = [k for k in self._table.keys()
                  if _scope(k).startswith(prefix) and self._partition_of(_scope(k)) == partition]
        for key in doomed:
            self._writes.delete(self._table, key, partition)
        self._heaps = None  # rebuilt without them
        return len(doomed)

    def reset(self) -> None:
        """Partitions moved: rebuild the horizon from the table when next needed."""
        self._heaps, self._newest = None, {}

    def count(self) -> int | None:
        """Marks held (None until the first batch after an assignment has read them: a status page must
        not scan a table that is still recovering)."""
        return None if self._heaps is None else sum(len(h) for h in self._heaps.values())

    def _push(self, partition: int, seconds: float, key: str) -> None:
        heapq.heappush(self._heaps.setdefault(partition, []), (seconds, key))
        if seconds > self._newest.get(partition, NO_TIME):
            self._newest[partition] = seconds

    def _heaps_now(self) -> dict[int, list[tuple[float, str]]]:
        if self._heaps is None:
            self._heaps, self._newest = {}, {}
            for key, raw in list(self._table.items()):
                if is_position_key(key) or is_redo_key(key) or is_forget_key(key):
                    continue  # applied positions, redo records and held forgets share the table
                mark = codec.decode_mark(raw)
                if mark is not None:
                    self._push(self._partition_of(_scope(key)), _seconds(mark[1]), key)
        return self._heaps


def _scope(key: str) -> str:
    return codec.split_key(key)[1]
