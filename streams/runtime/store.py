"""The one way to read scope state: views, the HTTP API and timers go through a ScopeStore, never through
raw table values, so the storage layout can change behind it."""

from __future__ import annotations

from collections.abc import Iterator

from credence.streams.scope.state import ScopeState


class ScopeStore:
    """Reads of the scopes this worker holds. `get` returns a fresh copy the caller may keep."""

    def __init__(self, table) -> None:
        self._table = table

    def get(self, scope: str) -> ScopeState | None:
        value = self._table.get(scope)
        return ScopeState.from_dict(value) if value else None

    def scopes(self) -> Iterator[str]:
        """Scopes held by this worker (keys of its assigned partitions)."""
        for key, value in list(self._table.items()):
            if value:
                yield key

    def states(self) -> Iterator[ScopeState]:
        for scope in self.scopes():
            state = self.get(scope)
            if state is not None:
                yield state

    def history(self, scope: str, entry_id: str) -> list[dict]:
        """The entry's journal events in order (event, cause, at, score, tier, evidence), oldest first.
        Not kept by this layout yet: an empty list."""
        return []

    def feedback_applied(self, scope: str, feedback_id: str, partition: int, offset: int) -> bool:
        """Whether the feedback record at `partition`/`offset` of the feedback topic was applied to the scope
        (consumed, and not waiting in the scope's queue behind an LLM request)."""
        state = self.get(scope)
        if state is None or state.applied.get(f"feedback:{partition}", -1) < offset:
            return False
        return not any(item["record"].get("feedback_id") == feedback_id for item in state.queue)
