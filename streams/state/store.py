"""The one way to read and write scope state. Views, timers and the HTTP API read through a ScopeStore,
never through raw table values; the scope agent writes through it.

A scope is split per entry (control value, entries, long lists one item per key, signal history in
chunks); live objects of the scopes a batch touches are cached (LRU). Layout and rationale: docs/state.md.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from credence.config.state import StateSettings
from credence.errors import StateError
from credence.streams.scope.scope_state import ScopeState
from credence.streams.state import codec
from credence.streams.state.history import History
from credence.streams.state.incarnations import Incarnations
from credence.streams.state.lists import ListItems, Stored
from credence.streams.state.versions import Versions
from credence.streams.state.writes import TableWrites
from credence.tables.entries import Entry
from credence.tables.memo import forget_texts


@dataclass
class StateTables:
    """The Faust tables the state lives in (bytes values, str keys)."""

    scopes: object
    entries: object
    lists: object
    history: object
    seen: object

    def __getitem__(self, name: str):
        return getattr(self, name)


@dataclass
class Live:
    """A decoded scope the agent steps in place, and what its stored keys need besides the state."""

    state: ScopeState
    history: dict[str, int] = field(default_factory=dict)  # entry id -> journal events recorded
    unsaved: set[str] = field(default_factory=set)  # entry ids to write even if no step changes them
    lists: Stored = field(default_factory=dict)


@dataclass(frozen=True)
class ScopeSummary:
    turns: int
    queued: int  # inputs waiting behind an LLM request
    requests: int  # LLM requests open
    idle: bool  # nothing queued, requested or buffered
    entries_version: int
    clock: datetime | None

    @property
    def stamp(self) -> tuple:
        """Equal stamps, equal entries and clock: what a count over the scope's entries depends on."""
        return (self.entries_version, self.turns, self.clock)


READ_CACHE = 256  # scopes decoded for readers (API, views) and kept while their control value is unchanged


log = logging.getLogger(__name__)


def copy_state(state: ScopeState) -> ScopeState:
    """A copy a reader may keep: the control part re-decoded, the (immutable) entries shared."""
    out = ScopeState.from_dict(state.control_dict())
    out.entries = dict(state.entries)
    return out


class ScopeStore:
    def __init__(self, tables: StateTables, settings: StateSettings, partition_of: Callable[[str], int],
                 writes: TableWrites) -> None:
        self._writes = writes  # the agent flushes them (changelog records) once per batch
        self._scopes, self._entries = tables.scopes, tables.entries
        self._history = History(tables.history, settings.history_max, writes, partition_of)
        self._lists = ListItems(tables.lists, writes, partition_of)
        self._incarnations = Incarnations(tables.seen, writes, partition_of)
        self._versions = Versions(tables.history, settings.history_max, writes, partition_of)
        self._settings = settings
        self._partition_of = partition_of
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._pending: set[str] = set()
        self._index: dict[str, set[str]] | None = None  # scope -> entry ids, built from one key scan
        self._arrived: set[int] = set()  # partitions moved since Faust last finished reading changelogs
        self._reads: OrderedDict[str, tuple[bytes, ScopeState]] = OrderedDict()  # readers' decoded copies
        self.unreadable: set[str] = set()  # scopes the last full read (`states`) could not decode

    # -- reads: consistent copies -------------------------------------------------------------------
    def get(self, scope: str) -> ScopeState | None:
        live = self._live.get(scope)
        if live is not None and scope not in self._pending:
            return copy_state(live.state)
        # A scope the agent has not loaded (or is mid-batch on): decode it once per stored version. Any
        # change to the scope rewrites its control value (entries bump `entries_version`), so an equal
        # control value means equal state.
        raw = self._scopes.get(scope)
        cached = self._reads.get(scope)
        if cached is not None and raw is not None and cached[0] == raw:
            self._reads.move_to_end(scope)
            return copy_state(cached[1])
        loaded = self._read(scope)
        if loaded is None:
            return None
        if raw is not None:
            self._reads[scope] = (raw, copy_state(loaded.state))
            while len(self._reads) > READ_CACHE:
                self._reads.popitem(last=False)
        return loaded.state

    def control(self, scope: str) -> ScopeState | None:
        """The scope without its entries (cheap: one small value)."""
        live = self._live.get(scope)
        if live is not None and scope not in self._pending:
            return ScopeState.from_dict(live.state.control_dict())
        control = codec.decode_control(self._scopes.get(scope))
        if control is None:
            return None
        if not control.legacy:
            self._lists.load(scope, control)
        control.state.entries = {}
        return control.state

    def summary(self, scope: str) -> ScopeSummary | None:
        """The scope's counters, for probes polled often: nothing copied, no list item decoded."""
        live = self._live.get(scope)
        if live is not None and scope not in self._pending:
            s = live.state
            return ScopeSummary(s.turns, len(s.queue), len(s.requests), s.idle, s.entries_version, s.clock)
        control = codec.decode_control(self._scopes.get(scope))
        if control is None:
            return None
        s, spans = control.state, control.spans
        queued = spans["queue"][1] if "queue" in spans else len(s.queue)
        busy = bool(s.requests) or queued > 0 or (spans["buffer"][1] if "buffer" in spans else len(s.buffer)) > 0
        return ScopeSummary(s.turns, queued, len(s.requests), not busy, s.entries_version, s.clock)

    def exists(self, scope: str) -> bool:
        """Whether the scope has state (stored, or live in this worker)."""
        return scope in self._live or self._scopes.get(scope) is not None

    def scopes(self) -> Iterator[str]:
        """Scopes held by this worker (keys of its assigned partitions)."""
        yield from list(self._scopes.keys())

    def states(self) -> Iterator[ScopeState]:
        """Every scope held, for counts (/status, /metrics)."""
        for _scope, _stamp, state in self.changed({}):
            yield state

    def changed(self, known: dict[str, tuple]) -> Iterator[tuple[str, tuple, ScopeState | None]]:
        """(scope, stamp, state) for every scope held; the state is None when `known` (scope -> stamp)
        already has its stamp, so a count kept per scope reads only the scopes that moved. A scope whose
        keys cannot be read (a table still recovering, or damage) is left out, named in `unreadable` and
        logged once, so one scope never takes the worker's status page down."""
        unreadable: set[str] = set()
        for scope in self.scopes():
            try:
                summary = self.summary(scope)
                if summary is None:
                    continue
                if known.get(scope) == summary.stamp:
                    yield scope, summary.stamp, None
                    continue
                state = self.get(scope)
            except StateError as exc:
                if scope not in self.unreadable:
                    log.error("scope %s cannot be read from the tables: %s", scope, exc)
                unreadable.add(scope)
                continue
            if state is not None:
                yield scope, summary.stamp, state
        self.unreadable = unreadable

    def live_count(self) -> int:
        return len(self._live)

    def entry_count(self, scope: str) -> int:
        live = self._live.get(scope)
        if live is not None and scope not in self._pending:
            return len(live.state.entries)
        if self._is_legacy(scope):
            return len(self.get(scope).entries)
        return len(self._index_now().get(scope, ()))

    def version(self, scope: str) -> int:
        """Grows whenever any entry of the scope changes; 0 for an unknown scope."""
        summary = self.summary(scope)
        return summary.entries_version if summary else 0

    def history(self, scope: str, entry_id: str) -> list[dict]:
        """The entry's journal events (event, cause, at, score, tier, reinforcement, disputation, version),
        oldest first, at most `history_max` of them."""
        raw = self._entries.get(codec.entry_key(scope, entry_id))
        if raw is None:
            return []
        return self._history.read(scope, entry_id, codec.decode_entry(raw)[1])

    def footprint(self, scope: str, entry_id: str) -> dict[str, int]:
        """The keys the tables hold of one entry (an erasure receipt counts them before and after): its own
        value, its signal-history chunks, its kept versions."""
        history = self._history.table
        return {"entries": int(self._entries.get(codec.entry_key(scope, entry_id)) is not None),
                "history": sum(history.get(codec.history_key(scope, entry_id, slot)) is not None
                               for slot in range(self._history.slots)),
                "versions": self._versions.count(scope, entry_id)}

    def as_of(self, state: ScopeState, at: datetime) -> list[Entry]:
        """What was valid in the scope at `at`, from its kept entry versions (versions.py): every entry the
        scope has or archived, nothing of another scope read. `state` (a reader's copy) names the entries;
        their newest versions are the tables' (what the batches made durable, as the versions are: a live
        scope may be a batch ahead of them). Safe off the event loop. Raises versions.Truncated."""
        control = codec.decode_control(self._scopes.get(state.scope))
        durable = control.state.archived if control is not None else {}
        newest = {}
        for eid in sorted({*state.entries, *state.archived, *durable}):
            raw = self._entries.get(codec.entry_key(state.scope, eid))
            if raw is not None:
                newest[eid] = codec.decode_entry(raw)[0].version
            elif eid in durable:
                newest[eid] = durable[eid]
        return self._versions.as_of(state.scope, newest, at)

    def feedback_applied(self, scope: str, feedback_id: str, partition: int, offset: int) -> bool:
        """Whether the feedback record at `partition`/`offset` of the feedback topic was applied to the scope
        (consumed, and not waiting in the scope's queue behind an LLM request)."""
        state = self.control(scope)  # the applied offsets and the queue: no entries needed
        if state is None or state.applied.get(f"feedback:{partition}", -1) < offset:
            return False
        return not any(item["record"].get("feedback_id") == feedback_id for item in state.queue)

    # -- the agent's side ---------------------------------------------------------------------------
    def live(self, scope: str, prefix: str | None = None) -> Live:
        """The scope's live object, loaded (and a schema-1 value split) on a miss; a new scope if unknown
        (`prefix`: its user's key prefix, for its incarnation). The scope is pending from here until `write`
        or `discard`."""
        live = self._live.get(scope)
        if live is None:
            live = self._read(scope) or Live(ScopeState(scope=scope, incarnation=self._incarnations.of(scope, prefix)))
            self._live[scope] = live
            self._evict()
        self._live.move_to_end(scope)
        self._pending.add(scope)
        return live

    def release(self, scope: str) -> None:
        """The batch applied nothing to the scope: its live object is the stored state again."""
        self._pending.discard(scope)

    def discard(self, scope: str) -> None:
        """Forget the live object (its batch failed): the next `live` reads the tables again."""
        self._live.pop(scope, None)
        self._pending.discard(scope)

    def write(self, scope: str, changed: Iterable[str], journal: list[dict]) -> None:
        """Write the keys a batch changed: history items of its journal records, changed entries (deleted
        if gone), and the control value. The caller has set the scope's record as the current event."""
        live = self._live[scope]
        state = live.state
        self._history.append(scope, live.history, journal)
        self._versions.append(scope, journal)
        ids = set(changed) | live.unsaved
        for eid in ids:
            entry = state.entries.get(eid)
            if entry is None:
                self._drop_entry(scope, eid, live.history.pop(eid, 0))
            else:
                self._put(self._entries, codec.entry_key(scope, eid), scope,
                          codec.encode_entry(entry, live.history.get(eid, 0)))
                if self._index is not None:
                    self._index.setdefault(scope, set()).add(eid)
        if set(changed):
            state.entries_version += 1
        live.unsaved.clear()
        self._lists.write(scope, state, live.lists)
        heads = {name: head for name, (head, _) in live.lists.items()}
        self._put(self._scopes, scope, scope, codec.encode_control(state, heads))
        self._pending.discard(scope)

    def forget(self, prefix: str, partition: int, offset: int | None = None) -> list[str]:
        """Delete every key of the scopes under `prefix` (a `tenant/user/`) held on `partition`; the
        caller has set a record of that partition as the current event. Returns the scopes deleted.
        `offset`: the forget's own, on the control topic; the user's scopes created on the partition from
        now on are a new incarnation (incarnations.py)."""
        def mine(key: str) -> bool:
            return key.startswith(prefix) and self._partition_of(codec.split_key(key)[0]) == partition

        doomed = [k for k in self._scopes.keys() if mine(k)]
        for table in (self._history.table, self._entries, self._lists.table, self._scopes):
            for key in [k for k in table.keys() if mine(k)]:
                self._writes.delete(table, key, partition)
        if offset is not None:
            self._incarnations.begin(prefix, partition, offset)
        for scope in doomed:
            self.discard(scope)
            self._reads.pop(scope, None)
            if self._index is not None:
                self._index.pop(scope, None)
        forget_texts()  # the process's memo caches of users' texts (tables/memo.py): whose is not kept
        return doomed

    def drop_partitions(self, partitions: set[int]) -> None:
        """Partitions were revoked (or assigned: their keys may have changed elsewhere meanwhile): drop
        their live scopes and the entry index, rebuilt from the tables when next needed."""
        for scope in [s for s in self._live if self._partition_of(s) in partitions]:
            self.discard(scope)
        self._arrived |= partitions
        self._index = None
        self._reads.clear()

    def recovered(self) -> None:
        """Faust finished reading the changelogs of newly assigned partitions into the tables. Whatever a
        reader (status, ticks, the API) built from those partitions while they were still recovering —
        the entry index, live copies — predates their keys: rebuild it from the tables when next needed.
        Scopes in a batch (pending) are not touched: their partitions were held all along."""
        for scope in [s for s in self._live if self._partition_of(s) in self._arrived and s not in self._pending]:
            self.discard(scope)
        self._arrived.clear()
        self._index = None
        self._reads.clear()

    # -- internals ----------------------------------------------------------------------------------
    def _read(self, scope: str) -> Live | None:
        control = codec.decode_control(self._scopes.get(scope))
        if control is None:
            return None
        if control.legacy:
            # Schema 1 held the entries inside the scope's value: keep them, and write each under its own
            # key (and the control value in schema 2) with the scope's next batch.
            return Live(control.state, unsaved=set(control.state.entries))
        state = control.state
        live = Live(state, lists=self._lists.load(scope, control))
        for eid in sorted(self._index_now().get(scope, ())):
            raw = self._entries.get(codec.entry_key(scope, eid))
            if raw is not None:
                entry, count = codec.decode_entry(raw)
                state.entries[eid] = entry
                live.history[eid] = count
        return live

    def _is_legacy(self, scope: str) -> bool:
        control = codec.decode_control(self._scopes.get(scope))
        return bool(control and control.legacy)

    def _index_now(self) -> dict[str, set[str]]:
        if self._index is None:
            index: dict[str, set[str]] = {}
            for key in list(self._entries.keys()):
                scope, eid = codec.split_key(key)[:2]
                index.setdefault(scope, set()).add(eid)
            self._index = index
        return self._index

    def _drop_entry(self, scope: str, eid: str, history: int) -> None:
        self._writes.delete(self._entries, codec.entry_key(scope, eid), self._partition_of(scope))
        self._history.drop(scope, eid, history)
        if self._index is not None:
            self._index.get(scope, set()).discard(eid)

    def _evict(self) -> None:
        while len(self._live) > self._settings.live_scopes_max:
            oldest = next((s for s in self._live if s not in self._pending), None)
            if oldest is None:
                return
            del self._live[oldest]

    def _put(self, table, key: str, scope: str, value: bytes) -> None:
        self._writes.put(table, key, value, self._partition_of(scope))

