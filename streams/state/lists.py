"""The long lists of a scope's state (codec.LISTS: queued inputs, buffered turns, processed fact ids) as the
store keeps them: one item per `scope\\x1fname\\x1fseq` key, the control value holding each list's first
seq and length, so a batch writes what it changed of a list, not the list."""

from __future__ import annotations

from collections.abc import Callable

from credence.streams.scope.scope_state import ScopeState
from credence.streams.state import codec
from credence.streams.state.writes import TableWrites

Stored = dict[str, tuple[int, list]]  # list name -> (first seq, items as stored)


class ListItems:
    """Reads and writes the lists table; `partition_of` names a scope's changelog partition."""

    def __init__(self, table, writes: TableWrites, partition_of: Callable[[str], int]) -> None:
        self.table = table
        self._writes = writes
        self._partition_of = partition_of

    def load(self, scope: str, control: codec.Control) -> Stored:
        """Read the scope's lists into its state; returns them as stored."""
        out = {}
        for name, (head, length) in control.spans.items():
            items = [codec.decode_item(self.table.get(codec.list_key(scope, name, seq)))
                     for seq in range(head, head + length)]
            setattr(control.state, name, items)
            out[name] = (head, list(items))
        return out

    def write(self, scope: str, state: ScopeState, stored: Stored) -> None:
        """Store each list's change, and update `stored` to match: steps only pop from a list's front and
        append to its end, so the items popped are deleted and the items appended written; anything else
        rewrites it whole."""
        partition = self._partition_of(scope)
        for name in codec.LISTS:
            now, (head, saved) = getattr(state, name), stored.get(name, (0, []))
            popped = next((k for k in range(len(saved)) if now and _same(saved[k], now[0])), len(saved))
            kept = len(saved) - popped
            if len(now) < kept or not all(_same(a, b) for a, b in zip(now[:kept], saved[popped:])):
                popped, kept = len(saved), 0
            for seq in range(head, head + popped):
                self._writes.delete(self.table, codec.list_key(scope, name, seq), partition)
            head += popped
            for seq, item in enumerate(now[kept:], start=head + kept):
                self._writes.put(self.table, codec.list_key(scope, name, seq), codec.encode_item(item), partition)
            stored[name] = (head, list(now))


def _same(a, b) -> bool:
    """The same list item: queued inputs by identity (two equal flushes are two items), ids by value."""
    return a is b or (isinstance(a, str) and a == b)
