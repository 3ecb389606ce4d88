"""`credence import`: entries brought in through the log, applied by the scope's owner.

An import record (credence.control, type "import") carries one scope's entries as exported snapshots. The
owner checks every one before it changes anything (a bad one dead-letters the whole record: never half an
import); each is journalled as it came (event "imported"), an archived one goes the archive's way. The same
``import_id`` again changes nothing, and a snapshot older than the entry held is left out. Nothing here moves
the scope's clock or runs the sweep: time-driven changes happen at the scope's next input.

The format and the import's rules: docs/export.md ("Import goes through the log").
"""

from __future__ import annotations

from credence.errors import DomainError
from credence.records.control import ControlRecord
from credence.records.journal import archive_record
from credence.records.kind import Kind
from credence.records.topics import TOPICS
from credence.streams.scope.context import Emit, StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import ARCHIVED, Entry
from credence.tables.scope import Scope

KIND = Kind.IMPORT
EVENT = "imported"
KEEP_IMPORT_IDS = 100  # imports remembered per scope to make a re-sent one a no-op


def snapshots(state: ScopeState, record: ControlRecord) -> list[Entry]:
    """The record's entries, every one read and checked, or DomainError naming the first bad one."""
    scope = Scope.parse(state.scope)
    entries, seen = [], set()
    for i, raw in enumerate(record.entries):
        try:
            entry = Entry.from_dict(raw)
        except DomainError as exc:
            raise DomainError(f"import {record.import_id!r}: entries[{i}]: {exc}") from None
        if entry.scope != scope.key:
            raise DomainError(f"import {record.import_id!r}: entries[{i}] ({entry.id}) belongs to "
                              f"{entry.scope}, not to {scope.key}")
        if entry.id in seen:
            raise DomainError(f"import {record.import_id!r}: entries[{i}]: id {entry.id!r} appears twice")
        seen.add(entry.id)
        entries.append(entry)
    return entries


def apply(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    import_id = record.import_id
    if import_id in state.imports:
        ctx.log.append(f"import {import_id} already applied: nothing changed")
        return
    entries = snapshots(state, record)  # all checked before the first change
    cause = f"import:{record.by or 'operator'}"
    applied = 0
    for entry in entries:
        held = state.entries.get(entry.id)
        known = held.version if held is not None else state.archived.get(entry.id, 0)
        if entry.version <= known:
            continue  # the scope's own version is as new or newer
        ctx.journal(entry, EVENT, cause, held)
        applied += 1
        if entry.status == ARCHIVED:
            ctx.emits.append(Emit(TOPICS.archive, archive_record(
                Scope(entry.tenant, entry.user, entry.character), entry_id=entry.id, entry_kind=entry.kind,
                archived_at=entry.archived_at or ctx.now, reason=cause, entry=entry.to_dict(),
                incarnation=ctx.incarnation)))
            state.entries.pop(entry.id, None)
            state.archived[entry.id] = entry.version
        else:
            state.entries[entry.id] = entry
            state.archived.pop(entry.id, None)
        state.touch(entry.id)
    state.imports = (state.imports + [import_id])[-KEEP_IMPORT_IDS:]
    ctx.log.append(f"import {import_id}: {applied} of {len(entries)} entries applied")
