"""Duplicate marks, bounded by when their records reached Kafka.

A mark (`seen` table) holds the position of the record that first carried an id in its scope, so the
record itself, redelivered after a crash, still applies; marks older than the horizon
(`state.seen_horizon_days`, by the records' Kafka timestamps) are pruned through a per-partition index
(mark_index.py). Why these clocks and this index: docs/state.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import orjson

from credence.streams.state import codec
from credence.streams.state.forgets import is_forget_key
from credence.streams.state.incarnations import is_incarnation_key
from credence.streams.state.mark_index import (
    CHUNK_KEYS,
    NO_TIME,
    PRUNE_CHUNKS,
    Head,
    chunk_key,
    head_key,
    is_index_key,
    width_for,
)
from credence.streams.state.positions import is_position_key
from credence.streams.state.redo import is_redo_key
from credence.streams.state.writes import TableWrites
from credence.tables.clock import format_instant, parse_instant


def mark_key(kind: str, scope: str, ident: str) -> str:
    return f"{kind}{codec.SEP}{scope}{codec.SEP}{ident}"


def is_mark_key(key: str) -> bool:
    """Applied positions, redo records, held forgets, incarnations and the prune index share the table."""
    return not (is_position_key(key) or is_redo_key(key) or is_forget_key(key) or is_index_key(key)
                or is_incarnation_key(key))


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
        self._heads: dict[int, Head] = {}  # partitions written since the last move: their prune index heads

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

    def position_of(self, kind: str, scope: str, ident: str) -> tuple[int, int] | None:
        """(partition, offset) of the record that first carried `ident` in the scope, as written (a turn's
        status reads it, GET …/turns/{turn_id}); None when no mark is kept (never seen, or pruned past the horizon)."""
        mark = codec.decode_mark(self._table.get(mark_key(kind, scope, ident)))
        if not mark:
            return None
        _name, partition, offset = mark[0].rsplit(":", 2)
        return int(partition), int(offset)

    def write(self, partition: int) -> None:
        """Write this batch's marks of `partition` (a record of it is the current event) and their place in
        the index, then delete the partition's marks that fell behind the horizon."""
        head = self._head(partition)
        new = [(key, *self._pending.pop(key)[:2]) for key, p in list(self._pending.items()) if p[2] == partition]
        head.newest = max([head.newest, *(_seconds(at) for _, _, at in new)])
        cutoff = head.newest - self._horizon
        by_bucket: dict[int, list[str]] = {}
        for key, position, at in new:
            seconds = _seconds(at)
            bucket = head.bucket_of(seconds if seconds != NO_TIME else max(head.newest, 0.0))
            if head.behind(bucket, cutoff):
                continue  # older than the horizon already: it would be pruned in this very batch
            self._writes.put(self._table, key, codec.encode_mark(position, at), partition)
            by_bucket.setdefault(bucket, []).append(key)
        for bucket, keys in by_bucket.items():
            self._index(partition, head, bucket, keys)
        self._prune(partition, head, cutoff)
        if head.changed:
            head.changed = False
            self._writes.put(self._table, head_key(partition), head.encode(), partition)

    def discard_pending(self) -> None:
        self._pending.clear()

    def forget(self, prefix: str, partition: int) -> int:
        head = self._head(partition)
        doomed = [(k, raw) for k, raw in list(self._table.items()) if is_mark_key(k)
                  and _scope(k).startswith(prefix) and self._partition_of(_scope(k)) == partition]
        for key, raw in doomed:
            mark = codec.decode_mark(raw)
            if mark is not None and mark[1] is not None:
                head.dropped(head.bucket_of(_seconds(mark[1])))
            self._writes.delete(self._table, key, partition)
        if head.changed:  # written with the forget's own deletions (the agent writes no batch around it)
            head.changed = False
            self._writes.put(self._table, head_key(partition), head.encode(), partition)
        return len(doomed)

    def reset(self) -> None:
        """Partitions moved: read each partition's head from the table when its next batch needs it."""
        self._heads = {}

    def count(self) -> int | None:
        """Marks held on the partitions written since the last move (None until one is: a status page must
        not scan a table that is still recovering)."""
        return sum(h.held() for h in self._heads.values()) if self._heads else None

    def _index(self, partition: int, head: Head, bucket: int, keys: list[str]) -> None:
        for i in range(0, len(keys), CHUNK_KEYS):
            chunk = keys[i:i + CHUNK_KEYS]
            number = head.add(bucket, len(chunk))
            self._writes.put(self._table, chunk_key(partition, bucket, number), orjson.dumps(chunk), partition)

    def _prune(self, partition: int, head: Head, cutoff: float) -> None:
        """Delete the marks of the oldest buckets behind `cutoff`, a bounded number of chunks per batch."""
        budget = PRUNE_CHUNKS
        for bucket in sorted(b for b in head.buckets if head.behind(b, cutoff)):
            first, number, held = head.buckets[bucket]
            while first < number and budget > 0:
                key = chunk_key(partition, bucket, first)
                for mark_at in orjson.loads(self._table.get(key) or b"[]"):
                    mark = codec.decode_mark(self._table.get(mark_at))
                    if mark is not None and head.bucket_of(_seconds(mark[1])) <= bucket:  # not marked anew since
                        self._writes.delete(self._table, mark_at, partition)
                        held -= 1
                self._writes.delete(self._table, key, partition)
                first, budget = first + 1, budget - 1
            if first == number:
                del head.buckets[bucket]
            else:
                head.buckets[bucket] = [first, number, max(0, held)]
            head.changed = True
            if budget == 0:
                return

    def _head(self, partition: int) -> Head:
        head = self._heads.get(partition)
        if head is None:
            raw = self._table.get(head_key(partition))
            head = self._heads[partition] = Head.decode(raw) if raw is not None else self._first_index(partition)
        return head

    def _first_index(self, partition: int) -> Head:
        """The partition has no index yet (a new partition, or marks written before it): index its marks,
        once, and delete those of the layout before them, which carry no time."""
        head = Head(width_for(self._horizon), changed=True)
        found: dict[int, list[str]] = {}
        for key, raw in list(self._table.items()):
            if not is_mark_key(key) or self._partition_of(_scope(key)) != partition:
                continue
            mark = codec.decode_mark(raw)
            if mark is None:
                continue
            if mark[1] is None:
                self._writes.delete(self._table, key, partition)
                continue
            head.newest = max(head.newest, _seconds(mark[1]))
            found.setdefault(head.bucket_of(_seconds(mark[1])), []).append(key)
        for bucket, keys in found.items():
            self._index(partition, head, bucket, keys)
        return head


def _scope(key: str) -> str:
    return codec.split_key(key)[1]
