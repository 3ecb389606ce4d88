"""The usage channel inside a scope step: recall hits, the daily decay sweep, restores, and
the external consensus that exempts an entry from that sweep.

Usage records are applied by the scope's owner in partition order, like every other input, so a
duplicated or replayed record lands on the same (source, UTC day of its ts) and changes nothing. The daily
sweep runs in event time at ``decay_sweep_at`` (03:00 UTC) and only while ``decay_enabled`` is on; what it
soft-archives stays in the scope's state with status "archived" (out of the prompt, recall and the
Stage-2 pool, never deleted, journalled) until an operator restores it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from credence.records.control import ControlRecord
from credence.records.kind import Kind
from credence.records.usage import UsageRecord
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.tables.consensus import Consensus
from credence.tables.entries import ARCHIVED, changed, set_consensus
from credence.tables.lifecycle import archive
from credence.tables.usage import decay_sweep, reinforce, restored, sweep_instants

KINDS = (Kind.USAGE, Kind.RESTORE, Kind.CONSENSUS)
SOFT_ARCHIVE_CAUSE = "usage_decay"


def apply(state: ScopeState, kind: Kind, record: UsageRecord | ControlRecord, ctx: StepContext) -> None:
    if kind == Kind.USAGE:
        _reinforce(state, record, ctx)
    elif kind == Kind.CONSENSUS:
        _consensus(state, record, ctx)
    else:
        _restore(state, record, ctx)


def _reinforce(state: ScopeState, record: UsageRecord, ctx: StepContext) -> None:
    # The hit's own UTC day decides idempotency, not the scope's clock, which other records may have
    # moved on: a hit arriving late for an earlier day still counts on that day.
    hit_at = record.ts or ctx.now
    for entry_id in record.entry_ids:
        entry = state.entries.get(entry_id)
        if entry is None or entry.protected or entry.status == ARCHIVED:
            ctx.log.append(f"usage for unknown, protected or archived entry {entry_id} ignored")
            continue
        usage = reinforce(entry.usage, hit_at, record.source, settings=ctx.usage)
        if usage is not entry.usage:  # this (source, UTC day) already counted
            ctx.put(state, changed(entry, ctx.now, usage=usage), "usage", record.source, entry)


def _restore(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    entry = state.entries.get(record.entry_id)
    if entry is None or entry.status != ARCHIVED or entry.usage.soft_archived_from is None:
        ctx.log.append(f"restore of {record.entry_id} ignored: not a soft-archived entry of this scope")
        return
    usage = replace(restored(entry.usage, ctx.now, settings=ctx.usage), soft_archived_from=None)
    back = changed(entry, ctx.now, status=entry.usage.soft_archived_from, archived_at=None, usage=usage)
    ctx.put(state, back, "restored", record.by or "operator", entry)


def _consensus(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    entry = state.entries.get(record.entry_id)
    if entry is None or entry.protected:
        ctx.log.append(f"consensus for {record.entry_id} ignored: not a non-protected entry of this scope")
        return
    # Stamped with the record's own time, so a duplicate of it is the same consensus and changes nothing.
    at = record.ts or ctx.now
    updated = set_consensus(entry, Consensus(record.score, record.by, at), ctx.now)
    ctx.put(state, updated, "consensus", record.by, entry)


def sweep_until(state: ScopeState, ctx: StepContext, until: datetime) -> None:
    """Run every daily decay sweep due at or before ``until`` (event time), oldest first."""
    if not ctx.usage.decay_enabled:
        return  # the gate: nothing rots, and no catch-up is owed for the time it was off
    for at in sweep_instants(state.last_usage_sweep_at, until, settings=ctx.usage):
        saved, ctx.now = ctx.now, at
        for entry in sorted(state.entries.values(), key=lambda e: e.id):
            if entry.protected or entry.status == ARCHIVED or entry.created_at > at:
                continue
            score = entry.consensus.score if entry.consensus is not None else None
            _, due = decay_sweep(entry.usage, at, consensus_score=score, settings=ctx.usage)
            if due:
                gone = archive(entry, at)
                gone = replace(gone, usage=replace(gone.usage, soft_archived_from=entry.status))
                ctx.put(state, gone, "archived", SOFT_ARCHIVE_CAUSE, entry)
        state.last_usage_sweep_at = at
        ctx.now = saved
