"""A scope's recent conversation: every turn joins the bounded log of tables/recent.py;
past the threshold a summarise request rewrites memo + head into a new memo. It runs whatever the
powerful-memory switch says (the seed: recent compression "remains available") and never holds the scope:
its answer is applied only if the head it summarised is still the head, else dropped and asked again.

The answer reaches the scope as any result does (a record on credence.control, or in the batch for an
in-process backend), and the memo lives in the scope's changelogged state: a restart or a replay of the
partition applies the same answer at the same place and never asks the model again for it."""

from __future__ import annotations

import hashlib

from credence.records.turn import TurnRecord
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import summarise_payload
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.clock import format_instant
from credence.tables.recent import RecentTurn, append_turn, apply_summary, summary_head


def record_turn(state: ScopeState, turn: TurnRecord, ctx: StepContext) -> None:
    """The turn joins the recent log; a summary is asked for when one is due and none is in flight."""
    if not ctx.memory.recent_memory_enabled:
        return
    kept = RecentTurn(turn.turn_id, turn.role, turn.text, format_instant(turn.ts))
    state.recent = append_turn(state.recent, kept, settings=ctx.memory)
    ask_summary(state, ctx)


def ask_summary(state: ScopeState, ctx: StepContext) -> None:
    if not ctx.memory.recent_memory_enabled:
        return
    head = summary_head(state.recent, settings=ctx.memory)  # first: most turns leave the log under its threshold
    if not head or state.pending_tasks(TaskName.SUMMARISE):
        return  # none due, or one in flight: one at a time, the next is asked when its answer is applied
    # Named by what it summarises, not by the scope's request counter: the other tasks' request ids stay as
    # they are in a scope that keeps no recent log, and a stale answer never names a newer request.
    key = "\x1f".join([str(state.recent.memo_version), *(t.turn_id for t in head)])
    rid = f"{TaskName.SUMMARISE}-{state.recent.memo_version}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    req = Request(id=rid, task=TaskName.SUMMARISE, payload=summarise_payload(state, head, ctx), issued_at=ctx.now,
                  boot=ctx.boot)
    state.requests[rid] = req
    ctx.requests.append(req)


def apply_answer(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    """The new memo replaces the head it summarised, if that is still the head; then the next summary is
    asked for when one is due (the same head again after a stale answer)."""
    updated = apply_summary(state.recent, payload["memo_version"], payload["head_ids"], output.get("summary", ""),
                            settings=ctx.memory)
    if updated is None:
        ctx.log.append(f"summary of {len(payload['head_ids'])} recent turns dropped: the head moved meanwhile")
    else:
        state.recent = updated
    ask_summary(state, ctx)
