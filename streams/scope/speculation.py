"""Speculative Stage-1: the windows a held scope's queued turns will close are asked before it gets there.

While an evidence request holds the scope, ``ahead`` asks the Stage-1 of the windows its queued turns will
close (window.py decides them by event time alone), as requests that hold nothing. An answer is applied
only when the scope's own logic asks for that Stage-1 (``stage1`` adopts the request), in the scope's order,
so a replay, a duplicate or a crash ends where the serialised run ends.

Why, and what happens to a wrong guess or a failed call: docs/design/scope.md ("Speculative Stage-1").
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from credence.records.control import ControlRecord
from credence.records.kind import ANSWERS, Kind
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import stage1_payload
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.tasks import TaskName
from credence.streams.scope.window import buffered, remaining_started, stage1_cut
from credence.tables.clock import parse_instant

# Queued inputs looked through for the next windows in one step: a window closes within stage1_max_batch
# user turns, so the nearest ones are found well before this; it bounds a step's work on a long queue.
SCAN = 128


def keep(state: ScopeState, kind: Kind, record: ControlRecord, ctx: StepContext) -> bool:
    """A speculative request's result or failure: kept on the request, never applied now (False: the record
    answers no speculative request). The first answer counts; a duplicate changes nothing."""
    req = state.requests.get(record.request_id)
    if req is None or not req.speculative:
        return False
    if req.answer is not None or req.failed:
        return True
    if kind == Kind.FAILED:
        req.failed = True  # not asked again until its window comes (_lost in step.py, `stage1`)
        ctx.log.append(f"speculative stage1 request {req.id} failed ({record.error})")
    else:
        req.answer = {"request_id": req.id, "task": req.task, "output": record.output}
    return True


def stage1(state: ScopeState, ctx: StepContext, turns: list[dict]) -> dict | None:
    """Ask for a Stage-1 of `turns`, adopting the speculative request that asked the same: its stored
    answer (a result record) is returned, to be applied now; None while the request is in flight."""
    adopted = _adopt(state, turns)
    if adopted is None:
        ctx.request(state, TaskName.STAGE1, stage1_payload(turns))
        return None
    state.next_id(TaskName.STAGE1)  # every later request keeps the id it has in a run without speculation
    adopted.speculative, adopted.issued_at = False, ctx.now
    if adopted.failed:
        ctx.reissue(adopted)  # its early call failed: asked now, as the window's own request
        return None
    answer, adopted.answer = adopted.answer, None
    return answer


def _adopt(state: ScopeState, turns: list[dict]) -> Request | None:
    """The speculative request asking for exactly `turns` (None: none). Every other one that shares a turn
    with them is dropped: its window can no longer come."""
    payload, ids = {"turns": turns}, {t["id"] for t in turns}
    adopted = None
    for req in [r for r in state.requests.values() if r.speculative]:
        if req.payload == payload:
            adopted = req
        elif any(t["id"] in ids for t in req.payload["turns"]):
            del state.requests[req.id]
    return adopted


def ahead(state: ScopeState, ctx: StepContext) -> None:
    """While an evidence request holds the scope, ask the Stage-1 of the windows its queued turns will
    close, up to `stage1_speculative_windows` speculative requests out at once."""
    limit = ctx.pipeline.stage1_speculative_windows
    if not limit or not state.queue or not state.blocked:
        return
    out = sum(1 for r in state.requests.values() if r.speculative)
    if out >= limit:
        return
    for turns in predicted(state, ctx, limit):
        rid = request_id(turns)
        if rid in state.requests:
            continue  # asked already (or failed: then asked normally when it comes)
        if out >= limit:
            return
        req = Request(id=rid, task=TaskName.STAGE1, payload=stage1_payload(turns), issued_at=ctx.now, boot=ctx.boot,
                      speculative=True)
        state.requests[rid] = req
        ctx.requests.append(req)
        out += 1


def request_id(turns: list[dict]) -> str:
    """Derived from the window's turns: a window asked again (after a restart) is the same request."""
    digest = hashlib.sha256(json.dumps(turns, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    return f"{TaskName.STAGE1}-s{digest[:16]}"


def predicted(state: ScopeState, ctx: StepContext, n: int) -> list[list[dict]]:
    """The next `n` windows (or fewer) the scope will cut, as step._drain will: the held request's result
    settles at the scope's clock, then each queued input runs at its own event time and settles there."""
    if state.clock is None:
        return []
    windows: list[list[dict]] = []
    buffer, started, clock = list(state.buffer), state.window_started_at, state.clock
    buffer, started = _cuts(buffer, started, clock, False, ctx, windows, n)
    for item in state.queue[:SCAN]:
        if len(windows) >= n:
            break
        kind, record = item["kind"], item["record"]
        if kind in ANSWERS:
            continue  # a promotion's answer: applied at the clock, where the windows were cut already
        if kind != Kind.FLUSH:
            clock = _later(clock, parse_instant(record.get("ts")))
        if kind == Kind.TURN:
            buffer.append(buffered(record))
            started = clock if started is None else started
        buffer, started = _cuts(buffer, started, clock, kind == Kind.FLUSH, ctx, windows, n)
    return windows


def _cuts(buffer: list[dict], started: datetime | None, now: datetime, flush: bool, ctx: StepContext,
          windows: list[list[dict]], n: int) -> tuple[list[dict], datetime | None]:
    """step._settle at `now`, and again after each window's answer, until the window stays open."""
    while len(windows) < n:
        cut = stage1_cut(buffer, started, now, ctx.pipeline, powerful=ctx.powerful, flush=flush)
        if not cut:
            break
        windows.append(buffer[:cut])
        buffer = buffer[cut:]
        started, flush = remaining_started(buffer), False
    return buffer, started


def _later(clock: datetime, at: datetime | None) -> datetime:
    """step.event_now: the scope's event time never runs backwards."""
    return clock if at is None or at < clock else at
