"""`credence memory dedupe`: near-duplicate live entries already stored, merged by the scope's owner.

The plan is a pure function of the entries (so the CLI's dry run, read from the journal, shows what the
owner would do). Each duplicate merges into the entry it restates: a persona entry absorbs the other's
evidence and sources (tables.lifecycle.merge_into_persona, the merge-on-promote path), two reflections
keep the better-evidenced one; the survivor takes the richer text, and the duplicate leaves the active
view through the archive (journalled "archived" with merged_into_id), never deleted.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from credence.config.memory import MemorySettings
from credence.records.control import ControlRecord
from credence.streams.scope.context import StepContext
from credence.streams.scope.restate import richer, same_statement
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import Entry, changed
from credence.tables.lifecycle import archive, merge_into_persona

_LIVE = {"persona": ("active",), "reflection": ("pending", "confirmed", "promote_blocked")}


def survivor_rank(entry: Entry, now: datetime, settings: MemorySettings) -> tuple:
    """Who survives a pair: protected first, then persona over reflection, better evidence, older, id."""
    score = entry.score(now, settings=settings)
    return (not entry.protected, entry.kind != "persona", -score if score != float("inf") else float("-inf"),
            entry.created_at, entry.id)


def duplicate_pairs(entries: list[Entry], now: datetime, settings: MemorySettings) -> list[tuple[Entry, Entry]]:
    """(survivor, duplicate) pairs among the live entries; each duplicate once, never a protected one."""
    live = sorted((e for e in entries if e.status in _LIVE.get(e.kind, ())), key=lambda e: survivor_rank(e, now, settings))
    pairs, gone = [], set()
    for i, keep in enumerate(live):
        if keep.id in gone:
            continue
        for other in live[i + 1:]:
            if other.id not in gone and not other.protected and same_statement(keep.text, other.text, settings):
                pairs.append((keep, other))
                gone.add(other.id)
    return pairs


def apply(state: ScopeState, record: ControlRecord, ctx: StepContext) -> None:
    cause = f"dedupe:{record.by or 'operator'}"
    for keep, drop in duplicate_pairs(list(state.entries.values()), ctx.now, ctx.memory):
        keep = state.entries[keep.id]  # as merged so far in this step
        text = richer(keep.text, drop.text)
        if keep.protected:
            survivor = keep  # a character-card entry is never rewritten; the duplicate only leaves
        elif keep.kind == "persona":
            survivor = merge_into_persona(keep, drop, ctx.now, text, settings=ctx.memory)
        else:
            extra = tuple(f for f in drop.source_fact_ids if f not in keep.source_fact_ids)
            survivor = changed(keep, ctx.now, text=text, source_fact_ids=(*keep.source_fact_ids, *extra))
        ctx.put(state, survivor, "merged", cause, keep)
        gone = replace(archive(drop, ctx.now), merged_into_id=keep.id)
        ctx.archive(state, gone, drop, cause)
    ctx.log.append(f"dedupe by {record.by or 'operator'} applied")
