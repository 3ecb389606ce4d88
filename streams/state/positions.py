"""Applied input positions: for each input partition, the offset after the last record this worker's
group applied (or refused on purpose), kept in the `seen` table beside the duplicate marks and written with
every batch's state, before its offsets may be committed.

A record past the next offset expected is a question (ASK): the broker is asked what a fetch from the
expected offset returns; a record skipped by the consumer is a GAP, and the partition is rewound to it.
Why Kafka's committed offset is only a hint here: docs/state.md.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from typing import Final

import orjson

from credence.streams.state import codec
from credence.streams.state.writes import TableWrites

log = logging.getLogger(__name__)

KIND: Final = "position"  # a `seen` key's first part: kind␟topic␟partition (duplicate marks use kind␟scope␟id)
APPLY, SEEN, GAP, ASK = "apply", "seen", "gap", "ask"


def position_key(topic: str, partition: int) -> str:
    return f"{KIND}{codec.SEP}{topic}{codec.SEP}{partition}"


def is_position_key(key: str) -> bool:
    return key.startswith(KIND + codec.SEP)


def durable_next(table, topic: str, partition: int) -> int | None:
    """The next offset to apply on (topic, partition) as the table holds it: what the batches made durable,
    for readers beside the agent (the API's waits for a turn; the agent's own `expected` runs ahead within a batch).
    Read without a current event: the store looks in every partition it holds."""
    raw = table.get(position_key(topic, partition))
    return orjson.loads(raw)["next"] if raw is not None else None


class Positions:
    def __init__(self, table, writes: TableWrites) -> None:
        self._table, self._writes = table, writes
        self._next: dict[tuple[str, int], int | None] = {}  # (topic, partition) -> next offset to apply
        self._dirty: set[tuple[str, int]] = set()
        self.rewinding: dict[tuple[str, int], int] = {}  # partitions being rewound, to their hole
        self._delivered: set[tuple[str, int]] = set()  # partitions that brought a record since the last reset
        # (topic, partition) -> (start, offsets): a read_committed fetch from `start` returned records at
        # `offsets` (ascending) and at no other offset up to the last of them
        self._fetched: dict[tuple[str, int], tuple[int, list[int]]] = {}

    def expected(self, topic: str, partition: int) -> int | None:
        """The next offset to apply on (topic, partition); None if nothing was ever recorded. Read from
        the table on first use (a record of the partition must be the current event)."""
        tp = (topic, partition)
        if tp not in self._next:
            raw = self._table.get(position_key(topic, partition))
            self._next[tp] = orjson.loads(raw)["next"] if raw is not None else None
        return self._next[tp]

    def check(self, topic: str, partition: int, offset: int) -> str:
        """APPLY the record at `offset`, skip it as SEEN (applied before), GAP: records before it were
        never delivered (the caller rewinds the partition to `expected` and applies nothing after it), or
        ASK: offsets before it did not come, and whether any holds a record is unknown (the caller asks
        the broker, `reported`, then checks again)."""
        self._delivered.add((topic, partition))
        expected = self.expected(topic, partition)
        if expected is not None and offset < expected:
            return SEEN
        empty = expected is None or offset == expected or self._empty(topic, partition, expected, offset)
        if empty:
            self.rewinding.pop((topic, partition), None)
            return APPLY
        return ASK if empty is None else GAP

    def reported(self, topic: str, partition: int, start: int, offsets: list[int]) -> None:
        """A read_committed fetch of (topic, partition) from `start` returned records at `offsets`: every
        other offset from `start` to the last of them holds none a consumer can get (a transaction marker,
        an aborted record). Such an offset stays empty, whatever is written later."""
        if offsets:
            self._fetched[(topic, partition)] = (start, sorted(offsets))

    def _empty(self, topic: str, partition: int, start: int, end: int) -> bool | None:
        """Whether offsets start..end-1 hold no record to deliver, as the last fetch reported (None: it
        did not read them all)."""
        fetched_from, offsets = self._fetched.get((topic, partition), (end, []))
        if fetched_from > start:
            return None
        first = bisect_left(offsets, start)
        if first < len(offsets) and offsets[first] < end:
            return False  # a record the broker holds was not delivered
        return True if offsets and end <= offsets[-1] else None

    def advance(self, topic: str, partition: int, offset: int) -> None:
        self._next[(topic, partition)] = offset + 1
        self._dirty.add((topic, partition))

    def skip_to(self, topic: str, partition: int, offset: int) -> None:
        """The broker no longer holds the records before `offset` (retention): apply from there on."""
        log.error("records %s..%d of %s[%d] were deleted before they were applied; going on from %d",
                  self._next.get((topic, partition)), offset - 1, topic, partition, offset)
        self.advance(topic, partition, offset - 1)
        self.rewinding.pop((topic, partition), None)

    def write(self, partition: int) -> None:
        """Write the batch's new positions of `partition` (a record of it is the current event)."""
        for tp in [tp for tp in self._dirty if tp[1] == partition]:
            self._dirty.discard(tp)
            self._writes.put(self._table, position_key(*tp), orjson.dumps({"v": 2, "next": self._next[tp]}),
                             partition)

    def stored(self, topics: list[str], partitions: set[int]) -> list[tuple[str, int, int]]:
        """(topic, partition, next offset) of each of `topics` on `partitions` that has a position and has
        brought no record since the assignment, for the rewind after it (read without a current event: the
        store looks in every partition). A partition that brought one needs none: it was read from at most
        its position (else `check` found the gap and rewinds it), and seeking a partition being read only
        brings records again."""
        found = [(t, p, self.expected(t, p)) for t in topics for p in sorted(partitions)
                 if (t, p) not in self._delivered]
        return [(t, p, offset) for t, p, offset in found if offset is not None]

    def known(self, partitions: set[int]) -> dict[str, int]:
        """{"topic:partition": next offset} of what this worker has read or restored on `partitions` (for
        /status: how far each held input partition is applied); nothing is read from the table here."""
        return {f"{t}:{p}": offset for (t, p), offset in sorted(self._next.items())
                if p in partitions and offset is not None}

    def reset(self) -> None:
        """Partitions moved: read the positions from the table again when next needed."""
        self._next.clear()
        self._dirty.clear()
        self.rewinding.clear()
        self._delivered.clear()
        self._fetched.clear()
