"""An entry's signal history as the store keeps it: its journal events in chunks of CHUNK items, under
`scope\\x1fentry_id\\x1fslot` keys that form a ring of slots keeping at least `history_max` events. A batch
writes each chunk it changed once, however many events the entry gained; the entry's own value counts
the events it has had, which says which chunk sits in which slot."""

from __future__ import annotations

from collections.abc import Callable

from credence.streams.scope.context import FACTS_KIND
from credence.streams.state import codec
from credence.streams.state.writes import TableWrites

CHUNK = 20  # history items per stored chunk


class History:
    """Reads and writes the history table; `partition_of` names a scope's changelog partition."""

    def __init__(self, table, history_max: int, writes: TableWrites, partition_of: Callable[[str], int]) -> None:
        self.table = table
        self._max = history_max
        self._writes = writes
        self._partition_of = partition_of
        self.slots = -(-history_max // CHUNK) + 1

    def read(self, scope: str, entry_id: str, count: int) -> list[dict]:
        """The newest `history_max` of the entry's `count` events, oldest first."""
        start = max(0, count - self._max)
        items: list[dict] = []
        for chunk in range(start // CHUNK, -(-count // CHUNK)):
            first, stored = self._chunk(scope, entry_id, chunk)
            items += stored[max(0, start - first):]
        return items

    def append(self, scope: str, counts: dict[str, int], journal: list[dict]) -> None:
        """Add the history items of a batch's journal records; `counts` (entry id -> events recorded) is
        advanced with them."""
        by_entry: dict[str, list[dict]] = {}
        for record in journal:
            if record.get("entry_kind") != FACTS_KIND:  # an entry's history, not a request's facts
                by_entry.setdefault(record["entry_id"], []).append(codec.history_item(record))
        for eid, new in by_entry.items():
            n = counts.get(eid, 0)
            counts[eid] = n + len(new)
            while new:
                chunk = n // CHUNK
                first, items = self._chunk(scope, eid, chunk) if n % CHUNK else (chunk * CHUNK, [])
                take = CHUNK - (n - first)
                items, new, n = items[:n - first] + new[:take], new[take:], n + min(take, len(new))
                self._writes.put(self.table, codec.history_key(scope, eid, chunk % self.slots),
                                 codec.encode_history(first, items), self._partition_of(scope))

    def drop(self, scope: str, entry_id: str, count: int) -> None:
        """Delete the slots an entry with `count` events has written."""
        partition = self._partition_of(scope)
        for slot in range(min(self.slots, -(-count // CHUNK))):
            self._writes.delete(self.table, codec.history_key(scope, entry_id, slot), partition)

    def _chunk(self, scope: str, entry_id: str, chunk: int) -> tuple[int, list[dict]]:
        """(first item number, items) of the entry's `chunk`-th chunk; empty if its slot holds another."""
        raw = self.table.get(codec.history_key(scope, entry_id, chunk % self.slots))
        if raw is not None:
            first, items = codec.decode_history(raw)
            if first == chunk * CHUNK:
                return first, items
        return chunk * CHUNK, []
