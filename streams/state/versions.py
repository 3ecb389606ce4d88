"""Every kept version of a scope's entries, for as-of reads ("what was valid at T", tables/validity.py).

A ring of `history_max` snapshots per entry in the `history` table, each written by the batch that
journalled it; an as-of read searches it per entry. Why not read the journal: docs/state.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import orjson

from credence.streams.scope.context import FACTS_KIND
from credence.streams.scope.erase import ERASED
from credence.streams.state import codec
from credence.streams.state.writes import TableWrites
from credence.tables.clock import as_utc
from credence.tables.entries import Entry
from credence.tables.validity import as_of, recorded_at


class Truncated(Exception):  # noqa: N818 - a signal to the reader, not an error of the store
    """An entry's versions before `oldest` (recorded after the instant asked for) were overwritten."""

    def __init__(self, entry_id: str, oldest: datetime) -> None:
        super().__init__(entry_id, oldest)
        self.entry_id, self.oldest = entry_id, oldest


def version_key(scope: str, entry_id: str, slot: int) -> str:
    return f"{scope}{codec.SEP}{entry_id}{codec.SEP}v{slot}"


class Versions:
    def __init__(self, table, kept: int, writes: TableWrites, partition_of: Callable[[str], int]) -> None:
        self._table, self._kept, self._writes, self._partition_of = table, kept, writes, partition_of

    def append(self, scope: str, journal: list[dict]) -> None:
        """Keep the snapshot of every entry version a batch journalled (the last of a version wins)."""
        latest: dict[tuple[str, int], dict] = {}
        for record in journal:
            if record.get("event") == ERASED:  # the user deleted the entry: no version of it is kept
                latest = {k: v for k, v in latest.items() if k[0] != record["entry_id"]}
                self.drop(scope, record["entry_id"], int(record["entry"]["version"]))
            elif record.get("entry_kind") != FACTS_KIND:
                latest[(record["entry_id"], int(record["entry"]["version"]))] = record["entry"]
        partition = self._partition_of(scope)
        for (eid, version), snapshot in latest.items():
            self._writes.put(self._table, version_key(scope, eid, version % self._kept),
                             orjson.dumps({"v": codec.SCHEMA, "entry": snapshot}), partition)

    def kept(self, scope: str, entry_id: str, below: int) -> list[int]:
        """The slots holding a version of the entry below `below`."""
        return [v % self._kept for v in range(max(1, below - self._kept), below)
                if self._table.get(version_key(scope, entry_id, v % self._kept)) is not None]

    def count(self, scope: str, entry_id: str) -> int:
        """The entry's kept versions, whichever they are."""
        return sum(self._table.get(version_key(scope, entry_id, slot)) is not None for slot in range(self._kept))

    def drop(self, scope: str, entry_id: str, below: int) -> None:
        """Delete every kept version of the entry below `below` (the erased event's)."""
        for slot in self.kept(scope, entry_id, below):
            self._writes.delete(self._table, version_key(scope, entry_id, slot), self._partition_of(scope))

    def read(self, scope: str, entry_id: str, version: int) -> Entry | None:
        """The kept snapshot of `version` (None when its slot holds another version, or nothing)."""
        raw = self._table.get(version_key(scope, entry_id, version % self._kept))
        if raw is None:
            return None
        entry = Entry.from_dict(orjson.loads(raw)["entry"])
        return entry if entry.version == version else None

    def as_of(self, scope: str, newest: dict[str, int], at: datetime) -> list[Entry]:
        """What was valid in `scope` at `at`: `newest` is every entry id of the scope (live or archived)
        with its newest version. Raises Truncated when an entry's kept versions start after `at`."""
        at = as_utc(at)
        found = [v for eid, last in sorted(newest.items()) if (v := self._newest_by(scope, eid, last, at))]
        return list(as_of(found, at).values())

    def _newest_by(self, scope: str, entry_id: str, last: int, at: datetime) -> Entry | None:
        """The newest kept version of the entry recorded at or before `at`: a binary search, since a
        version's recorded time grows with its number; a version never journalled on its own (two changes
        in one step) leaves a gap, passed over downwards."""
        floor = max(1, last - self._kept + 1)
        lo, hi, best = floor, last, None
        while lo <= hi:
            mid = (lo + hi) // 2
            snap = self._at_or_below(scope, entry_id, mid, lo)
            if snap is None:
                lo = mid + 1
            elif recorded_at(snap) <= at:
                best, lo = snap, mid + 1
            else:
                hi = snap.version - 1
        if best is None and floor > 1:
            oldest = next((s for v in range(floor, last + 1) if (s := self.read(scope, entry_id, v))), None)
            if oldest is not None:
                raise Truncated(entry_id, recorded_at(oldest))
        return best

    def _at_or_below(self, scope: str, entry_id: str, version: int, floor: int) -> Entry | None:
        for v in range(version, floor - 1, -1):
            snap = self.read(scope, entry_id, v)
            if snap is not None:
                return snap
        return None
