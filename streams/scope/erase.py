"""One entry at a time, as user signals: deleting one entry, "remember this", rewording one.

Erase: the entry and the reflections merged into it leave the scope's state, journalled "erased" without
text, and its id is kept in ``ScopeState.erased`` so a replay of the old turns never brings it back.
Remember: a user-provenance fact entered where Stage-1 would have put it. Edit: a new wording, same id and
counters, the old one in the version history; journalled "edited".

The rules in full: docs/design/scope.md ("One entry at a time").
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from credence.records.control import ControlRecord
from credence.records.kind import Kind
from credence.streams.scope import restate
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.clock import format_instant, parse_instant
from credence.tables.entries import ARCHIVED, PROMOTED, REFLECTION, Entry, rewrite_text
from credence.tables.origin import fact_id
from credence.tables.version_history import USER_EDIT

KINDS = (Kind.ERASE, Kind.REMEMBER, Kind.EDIT)
EDITED = "edited"  # the journal event of a user's rewording
EDIT_CAUSE = "user_edit"  # its cause: "user_edit:<by>"
ERASED = "erased"  # the journal event of a deleted entry
DELETE_CAUSE = "user_delete"  # its cause: "user_delete:<by>[: <reason>]"
REMEMBER_CAUSE = "user_remember"  # the cause of a reflection a "remember this" fact created
# Erased ids a scope keeps (oldest dropped first): bounds the control value; an id dropped from here can be
# re-created by a replay of turns older than its deletion.
KEEP_ERASED = 1000


def apply(state: ScopeState, kind: Kind, record: ControlRecord, ctx: StepContext) -> None:
    if kind == Kind.ERASE:
        erase(state, record, ctx)
    elif kind == Kind.EDIT:
        edit(state, record, ctx)
    else:
        remember(state, record, ctx)


def refusal(state: ScopeState, entry_id: str, editing: bool = False) -> str | None:
    """Why the entry cannot be deleted (or, ``editing``, reworded; the API answers it: 404 or 409), or None."""
    entry = state.entries.get(entry_id)
    if entry is None:
        return "missing"
    if entry.protected:
        return "protected"
    if entry.kind == REFLECTION and entry.status == PROMOTED and entry.merged_into_id in state.entries:
        return f"promoted into {entry.merged_into_id}"
    if editing and entry.status == ARCHIVED:
        return "archived"
    return None


def doomed(state: ScopeState, entry_id: str) -> list[Entry]:
    """The entry and the non-protected entries merged into it, which carry its content."""
    sources = sorted((e for e in state.entries.values() if e.merged_into_id == entry_id and not e.protected),
                     key=lambda e: e.id)
    return [state.entries[entry_id], *sources]


def erase(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    why = refusal(state, record.entry_id)
    by = record.by or "user"
    if why == "missing":
        # The API sends a delete only for an entry it saw: read before the turns that made it (a replay of
        # the topics from the start reads them side by side), so what they said must not make it either.
        _remember_erased(state, record.entry_id, state.archived.get(record.entry_id, 0) + 1, by, ctx.now)
        ctx.log.append(f"delete of {record.entry_id}: not in the scope (yet); what was said before is held back")
        return
    if why is not None:
        ctx.log.append(f"delete of {record.entry_id} ignored: {why}")
        return
    cause = f"{DELETE_CAUSE}:{by}" + (f": {record.reason}" if record.reason else "")
    for entry in doomed(state, record.entry_id):
        gone = without_content(entry, ctx.now)
        ctx.journal(gone, ERASED, cause, entry)
        state.entries.pop(entry.id)
        state.touch(entry.id)
        _remember_erased(state, entry.id, gone.version, by, ctx.now)


def _remember_erased(state: ScopeState, entry_id: str, version: int, by: str, at: datetime) -> None:
    state.archived[entry_id] = version  # a later life continues the version line past the erased event
    state.erased.pop(entry_id, None)
    state.erased[entry_id] = {"at": format_instant(at), "version": version, "by": by}
    while len(state.erased) > KEEP_ERASED:
        del state.erased[next(iter(state.erased))]


def without_content(entry: Entry, now: datetime) -> Entry:
    """The erased event's snapshot: identity, counters and times, nothing the user said."""
    return replace(entry, text="", subject="", source_fact_ids=(), recent_mentions=(), version_history=(),
                   status=ARCHIVED, archived_at=now, version=entry.version + 1, updated_at=now)


def held_back(state: ScopeState, entry_id: str, source_fact_ids: list[str]) -> bool:
    """Whether a synthesis from these facts would bring back an entry the user deleted: every fact was said
    at or before the deletion (or when, is unknown)."""
    gone = state.erased.get(entry_id)
    if gone is None:
        return False
    at = parse_instant(gone["at"])
    for f in source_fact_ids:
        held = state.facts.get(f, {})
        said = parse_instant(held.get("said_at"))
        # "remember this" comes on the control partition after the delete it follows: always new
        if held.get("remembered") or (said is not None and said > at):
            return False
    return True


def said_at(cited: list[str], turns: dict[str, dict]) -> str | None:
    """When a fact was said: its latest cited turn's instant (a Stage-1 fact)."""
    times = [parse_instant(turns[t]["ts"]) for t in cited if t in turns and turns[t].get("ts")]
    return format_instant(max(times)) if times else None


def remember(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    text = " ".join(record.text.split())
    if not restate.admit(ctx, TaskName.STAGE1, text):
        return  # the API refuses such a text with its reason before anything is sent
    subject = record.subject
    fid = fact_id([record.remember_id], subject, "positive", text)
    if state.knows_fact(fid):
        return  # the same request applied again
    fact = {"id": fid, "text": text, "subject": subject, "importance": record.importance,
            "polarity": "positive", "source_turn_ids": [record.remember_id], "origin": "user"}
    state.facts[fid] = {"fact": fact, "stage2": "pending" if ctx.powerful else "skipped",
                        "synthesis": "after_stage2" if ctx.powerful else "pending",
                        "said_at": format_instant(record.ts or ctx.now), "remembered": True}


def edit(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    """The user rewords an entry: same id and counters, the old wording kept in its version history (and,
    a change of meaning, journalled closed first)."""
    why = refusal(state, record.entry_id, editing=True)
    text = " ".join(record.text.split())
    if why is not None or not restate.admit(ctx, TaskName.STAGE1, text):
        ctx.log.append(f"edit of {record.entry_id} ignored: {why or 'not a self-contained statement'}")
        return
    entry = state.entries[record.entry_id]
    updated = rewrite_text(entry, text, ctx.now, reason=USER_EDIT, settings=ctx.memory)
    ctx.put(state, updated, EDITED, f"{EDIT_CAUSE}:{record.by or 'user'}", entry)


def remembered(state: ScopeState, source_fact_ids: list[str]) -> bool:
    return any(state.facts.get(f, {}).get("remembered") for f in source_fact_ids)
