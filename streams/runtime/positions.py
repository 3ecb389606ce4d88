"""Applied input positions: for each input partition, the offset after the last record this worker's
group applied (or refused on purpose), kept in the `seen` table beside the duplicate marks and written with
every batch's state, before its offsets may be committed.

Kafka's committed offset is only a hint here. Faust commits what its streams acknowledged, and it counts
offsets it never delivered (a fetch it dropped during a rebalance, a gap it takes for compaction) as
acknowledged too: a committed offset could then run ahead of the state, and the records between were
never applied by anyone. Measured as lost turns and a stuck Stage-1 result when a worker left the group.
The input topics are append-only (no compaction, no transactions), so their offsets have no holes: a
record whose offset is past the next one expected means records were skipped. The partition is then
rewound to the expected offset (after every batch that still brings records past the hole) and nothing
after the hole is applied until the missing record comes.
A hole the broker cannot fill (retention deleted the records first) is logged as an error and skipped.
"""

from __future__ import annotations

import logging
from typing import Final

import orjson

from credence.streams.runtime import codec
from credence.streams.runtime.writes import TableWrites

log = logging.getLogger(__name__)

KIND: Final = "position"  # a `seen` key's first part: kind␟topic␟partition (duplicate marks use kind␟scope␟id)
APPLY, SEEN, GAP = "apply", "seen", "gap"


def position_key(topic: str, partition: int) -> str:
    return f"{KIND}{codec.SEP}{topic}{codec.SEP}{partition}"


def is_position_key(key: str) -> bool:
    return key.startswith(KIND + codec.SEP)


class Positions:
    def __init__(self, table, writes: TableWrites) -> None:
        self._table, self._writes = table, writes
        self._next: dict[tuple[str, int], int | None] = {}  # (topic, partition) -> next offset to apply
        self._dirty: set[tuple[str, int]] = set()
        self.rewinding: dict[tuple[str, int], int] = {}  # partitions being rewound, to their hole
        self._delivered: set[tuple[str, int]] = set()  # partitions that brought a record since the last reset

    def expected(self, topic: str, partition: int) -> int | None:
        """The next offset to apply on (topic, partition); None if nothing was ever recorded. Read from
        the table on first use (a record of the partition must be the current event)."""
        tp = (topic, partition)
        if tp not in self._next:
            raw = self._table.get(position_key(topic, partition))
            self._next[tp] = orjson.loads(raw)["next"] if raw is not None else None
        return self._next[tp]

    def check(self, topic: str, partition: int, offset: int) -> str:
        """APPLY the record at `offset`, skip it as SEEN (applied before), or GAP: records before it were
        never delivered; the caller rewinds the partition to `expected` and applies nothing after it."""
        self._delivered.add((topic, partition))
        expected = self.expected(topic, partition)
        if expected is None or offset == expected:
            self.rewinding.pop((topic, partition), None)
            return APPLY
        return SEEN if offset < expected else GAP

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

    def reset(self) -> None:
        """Partitions moved: read the positions from the table again when next needed."""
        self._next.clear()
        self._dirty.clear()
        self.rewinding.clear()
        self._delivered.clear()
