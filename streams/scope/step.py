"""One scope step: (state, input, context) -> state + effects. Pure apart from mutating the state it
was given (a fresh copy the agent loaded) and filling the context's effect lists.

Inputs: a turn, explicit feedback, an LLM result or failure, a tick or a flush. Every evidence request holds
the scope (inputs arriving meanwhile queue and run after the result); promotion does not. Why, and how
speculative Stage-1 overlaps a long scope's calls without changing what it decides: docs/design/scope.md
("What holds a scope").
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta

from credence.records.control import ControlRecord
from credence.records.feedback import FeedbackRecord
from credence.records.inputs import Applicable, InputRecord, as_record
from credence.records.kind import ANSWERS, Kind
from credence.records.turn import TurnRecord
from credence.streams.scope import (
    corrections,
    dedupe,
    erase,
    imports,
    quiet,
    recent,
    refine,
    results,
    speculation,
    usage,
)
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import (
    AI_TEXT_CHARS,
    OPEN_REFLECTION_STATUSES,
    SYNTHESIS_MAX_FACTS,
    correction_payload,
    feedback_payload,
    forget_candidates,
    promotion_payload,
    stage2_batch,
    stage2_payload,
    synthesis_payload,
    target_payload,
)
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.tasks import TaskName
from credence.streams.scope.window import buffered, remaining_started, stage1_cut
from credence.tables.fallback import fallback_tick
from credence.tables.keywords import KeywordText
from credence.tables.lifecycle import (
    ATTEMPT,
    BLOCK,
    NOT_DUE,
    WAIT,
    block_promotion,
    blocked_retry_due,
    confirm_by_score,
    promote_decision,
    record_promote_attempt,
    sweep_cannot_change,
    sweep_entry,
    time_cannot_move,
    unblock_promotion,
)
from credence.tables.mentions import lift_suppression, mentioned_in, record_mention
from credence.tables.rendering import renderable


def event_now(state: ScopeState, at: datetime | None) -> datetime:
    """Event time never runs backwards for a scope."""
    if state.clock is None:
        return at
    return state.clock if at is None or at < state.clock else at


def _is_promotion_result(state: ScopeState, record: ControlRecord) -> bool:
    req = state.requests.get(record.request_id)
    return req is not None and req.task == TaskName.PROMOTION


def step(state: ScopeState, item: Applicable, ctx: StepContext) -> None:
    """Apply one input: its Kind (turn, feedback, usage, a control type) and its checked record."""
    kind, record = Kind(item.kind), item.record
    ctx.incarnation = state.incarnation  # journalled with every record the step emits
    _housekeeping(state, ctx, timeless_tick=kind == Kind.TICK and not record.timed)
    if kind in ANSWERS and speculation.keep(state, kind, record, ctx):
        return  # kept for the window it answers, applied when the scope asks for that window
    _apply(state, kind, record, ctx)
    speculation.ahead(state, ctx)  # held: the windows its queued turns will close are asked now


def _apply(state: ScopeState, kind: Kind, record: InputRecord, ctx: StepContext) -> None:
    if kind in ANSWERS:
        if _is_promotion_result(state, record) and (state.blocked or state.queue):
            state.queue.append({"kind": kind, "record": record.to_dict()})  # the wire form: state stores it
            return
        _apply_result(state, kind, record, ctx)
        _drain(state, ctx)
        return
    if kind == Kind.TICK:
        # A tick without a time only re-issues lost requests (above); a timed one also moves the clock.
        if not state.blocked and not state.queue and record.timed:
            _advance(state, ctx)
            _settle(state, ctx)
        return
    if state.blocked or state.queue:
        state.queue.append({"kind": kind, "record": record.to_dict()})
        return
    _run(state, kind, record, ctx)


def _apply_result(state: ScopeState, kind: Kind, record: ControlRecord, ctx: StepContext) -> None:
    results.apply(state, kind, record, ctx)
    _settle(state, ctx)


def _run(state: ScopeState, kind: Kind, record: InputRecord, ctx: StepContext) -> None:
    if kind == imports.KIND:  # a transfer of state: time-driven changes wait for the scope's next input
        imports.apply(state, record, ctx)
        return
    _advance(state, ctx)
    if kind == Kind.TURN:
        _on_turn(state, record, ctx)
    elif kind == Kind.FEEDBACK:
        _on_feedback(state, record, ctx)
    elif kind in usage.KINDS:
        usage.apply(state, kind, record, ctx)
    elif kind == Kind.DEDUPE:
        dedupe.apply(state, record, ctx)
    elif kind in erase.KINDS:
        erase.apply(state, kind, record, ctx)
    _settle(state, ctx, flush=(kind == Kind.FLUSH))


def _drain(state: ScopeState, ctx: StepContext) -> None:
    while state.queue and not state.blocked:
        item = state.queue.pop(0)
        kind = Kind(item["kind"])
        record = as_record(kind, item["record"])
        if kind in ANSWERS:
            ctx.now = event_now(state, None)
            _apply_result(state, kind, record, ctx)
            continue
        ctx.now = event_now(state, record.ts if kind != Kind.FLUSH else None)
        _run(state, kind, record, ctx)


def _housekeeping(state: ScopeState, ctx: StepContext, timeless_tick: bool = False) -> None:
    """Switch transitions and re-issuing requests lost with an earlier worker run, failed, or waiting for
    the backend with their back-off over."""
    if state.powerful is not None and state.powerful != ctx.powerful:
        if not ctx.powerful:
            state.switched_off_at = ctx.now
        elif state.buffer:
            state.window_started_at = ctx.now  # back on: the first window is timed from the switch
        # Facts still waiting for Stage-2 skip it either way. Off: there is no Stage-2, so they go straight
        # to synthesis instead of waiting for the switch. Back on: signal extraction starts from the
        # current cursor, never replaying the gap. Facts of a Stage-2 call in flight wait for its result.
        asked = {f["id"] for r in state.pending_tasks(TaskName.STAGE2) for f in r.payload["facts"]}
        for fact_id, fact in state.facts.items():
            if fact["stage2"] == "pending" and fact_id not in asked:
                fact["stage2"] = "skipped"
                fact["synthesis"] = "pending" if fact["synthesis"] == "after_stage2" else fact["synthesis"]
    state.powerful = ctx.powerful
    lost = [req for req in state.requests.values() if _lost(req, ctx, timeless_tick)]
    if not lost:
        return  # every step comes here: the queue (a long scope's backlog) is only scanned when needed
    answered = {item["record"].get("request_id") for item in state.queue}  # a result waiting its turn
    for req in lost:
        if req.id not in answered:
            if not ctx.powerful and req.task in results.SWITCHED_TASKS:
                results.drop_switched_off(state, req, ctx)  # never re-sent once the switch is off
            else:
                ctx.reissue(req)


def _lost(req: Request, ctx: StepContext, timeless_tick: bool) -> bool:
    if req.speculative:  # answered, or failed (then its window is asked normally): nothing to ask again
        return req.boot != ctx.boot and req.answer is None and not req.failed
    return req.boot != ctx.boot or req.failed or results.retry_due(req, ctx.now, timeless_tick)


def _advance(state: ScopeState, ctx: StepContext) -> None:
    """Move the scope's clock to now, running the archive sweep for every sweep interval passed."""
    now = ctx.now
    if state.last_sweep_at is None:
        state.last_sweep_at = now
    every = timedelta(hours=ctx.memory.archive_sweep_interval_hours)
    for at in _sweep_times(state.last_sweep_at, now, ctx.pipeline.sweep_hourly_catchup_days, every):
        usage.sweep_until(state, ctx, at)
        _sweep(state, ctx, at)
    usage.sweep_until(state, ctx, now)
    if state.clock is None or now > state.clock:
        state.clock = now


def _sweep_times(last: datetime, now: datetime, hourly_days: int, every: timedelta):
    """The instants the sweep (every `every`, hourly by default) would have run at between `last` and
    `now`; after a long gap the middle of it is visited daily (the sub-zero tally counts at most once a
    day anyway)."""
    t, day = last, timedelta(days=1)
    while t + every <= now:
        long_gap = t - last >= timedelta(days=hourly_days) and now - t >= day
        t += day if long_gap and day > every else every
        yield t


def _sweep(state: ScopeState, ctx: StepContext, at: datetime) -> None:
    saved, ctx.now = ctx.now, at
    due, still = quiet.due_for_sweep(state, ctx)
    for entry in sorted(due, key=lambda e: e.id):
        lifted = lift_suppression(entry, at, settings=ctx.memory)
        ctx.put(state, lifted, "suppression_lifted", "mention_window", entry)
        swept, archived = sweep_entry(lifted, at, settings=ctx.memory)
        if archived:
            ctx.archive(state, swept, lifted, "sweep")
            continue
        ctx.put(state, swept, "sweep", "sweep", lifted)
        kept = state.entries.get(entry.id)
        if kept is not None and sweep_cannot_change(kept, settings=ctx.memory):
            still[entry.id] = kept  # no later sweep changes it until the entry itself changes
    if not ctx.powerful:
        _fallback(state, ctx)
    state.last_sweep_at = at
    ctx.now = saved


def _fallback(state: ScopeState, ctx: StepContext) -> None:
    """Weak memory: age-driven confirm/promote, one transition per reflection per tick."""
    for entry in sorted(state.entries.values(), key=lambda e: e.id):
        if entry.kind != "reflection" or entry.id not in state.entries:
            continue
        personas = [e for e in state.entries.values() if e.kind == "persona"]
        blocked = entry if entry.status == "promote_blocked" else None
        if blocked is not None:
            # Still the confirmed reflection it was: the age-driven path may promote it without the LLM.
            entry = unblock_promotion(blocked, ctx.now)
        step_ = fallback_tick(entry, ctx.now, personas=personas, switched_off_at=state.switched_off_at,
                              settings=ctx.memory)
        if step_ is None:
            continue
        if blocked is not None:
            ctx.put(state, entry, "promotion_unblocked", "fallback", blocked)
        if step_.persona is not None:
            ctx.put(state, step_.persona, "merged", "fallback_merge", state.entries.get(step_.persona.id))
        ctx.put(state, step_.reflection, "transition", "fallback", entry)


def _on_turn(state: ScopeState, turn: TurnRecord, ctx: StepContext) -> None:
    state.buffer.append(buffered(turn))
    recent.record_turn(state, turn, ctx)
    if state.window_started_at is None:
        state.window_started_at = ctx.now
    if turn.role == "ai":
        _on_ai_turn(state, turn, ctx)
        return
    state.recent_user_messages = (state.recent_user_messages + [turn.text])[-3:]
    surfaced = [state.entries[i] for i in state.surfaced if i in state.entries]
    surfaced = [e for e in surfaced if e.kind == "reflection" and e.status in OPEN_REFLECTION_STATUSES]
    state.surfaced = []
    if surfaced:
        ctx.request(state, TaskName.FEEDBACK, feedback_payload(state, turn.text, surfaced))
    said = KeywordText.of(turn.text)  # one normalisation for both hooks
    if said.has_any(ctx.memory.forget_keywords):
        # A forget request may name anything the scope remembers, not only what the character said lately.
        named = forget_candidates(state, turn.text, ctx)
        if named:
            ctx.request(state, TaskName.TARGET, target_payload(state, named, turn_id=turn.turn_id, forget_only=True))
    if said.has_any(ctx.memory.negative_keywords):
        # A rebuttal answers what the character said lately: entries it mentioned inside the window, persona
        # entries included, whatever else the turn surfaced (the surfaced reflections get their own check).
        since = ctx.now - timedelta(hours=ctx.memory.mention_window_hours)
        asked = {e.id for e in surfaced}
        mentioned = [e for e in state.entries.values() if not e.protected and e.id not in asked
                     and any(m > since for m in e.recent_mentions) and e.status in (*OPEN_REFLECTION_STATUSES, "active")]
        if mentioned:
            ctx.request(state, TaskName.TARGET, target_payload(state, mentioned, turn_id=turn.turn_id))


def _on_ai_turn(state: ScopeState, turn: TurnRecord, ctx: StepContext) -> None:
    state.last_ai_text = turn.text[-AI_TEXT_CHARS:]
    surfaced = []
    ids = turn.surfaced_ids or _mentioned_ids(state, turn.text, ctx)
    for entry_id in ids:
        entry = state.entries.get(entry_id)
        if entry is None:
            continue  # surfaced ids name entries of this scope only; others are ignored, never trusted
        ctx.put(state, record_mention(entry, ctx.now, settings=ctx.memory), "mention", "ai_mention", entry)
        if entry.kind == "reflection":
            surfaced.append(entry_id)
    state.surfaced = surfaced


def _mentioned_ids(state: ScopeState, text: str, ctx: StepContext) -> list[str]:
    """No surfaced_ids from the client: the renderable entries the AI text names (lexical fallback), so
    repetition control and surfaced feedback work without client cooperation."""
    # The lexical match first: it is the cheap and selective test on a scope of thousands of entries.
    named = mentioned_in(text, quiet.mention_candidates(state, text, ctx), settings=ctx.memory)
    return sorted(e.id for e in named if not e.protected and renderable(e, ctx.now, settings=ctx.memory))


def _on_feedback(state: ScopeState, record: FeedbackRecord, ctx: StepContext) -> None:
    """Explicit feedback from the UI/API: confirm, deny or ignore one entry (one step with its evidence)."""
    entry = state.entries.get(record.entry_id)
    if entry is None or entry.protected:
        ctx.log.append(f"feedback for unknown or protected entry {record.entry_id} ignored")
        return
    results.apply_feedback(state, entry, record.decision, ctx, cause_prefix="explicit")


def _settle(state: ScopeState, ctx: StepContext, flush: bool = False) -> None:
    """After any change: score-driven transitions, then schedule the next evidence work."""
    if ctx.powerful:
        _score_transitions(state, ctx)
    if state.blocked:
        return
    cut = stage1_cut(state.buffer, state.window_started_at, ctx.now, ctx.pipeline, powerful=ctx.powerful,
                     flush=flush)
    if cut:
        turns = state.buffer[:cut]
        state.buffer = state.buffer[cut:]
        state.window_started_at = remaining_started(state.buffer)
        answer = speculation.stage1(state, ctx, turns)
        if answer is not None:  # asked ahead and answered: applied as its result record arriving next would be
            ctx.now = event_now(state, None)
            _apply_result(state, Kind.RESULT, as_record(Kind.RESULT, answer), ctx)
        return
    if ctx.powerful:
        facts = stage2_batch(state, ctx)
        payload = stage2_payload(state, ctx, facts) if facts else None
        if payload and payload["observations"]:
            ctx.request(state, TaskName.STAGE2, payload)
            return
        if payload:
            results.without_candidates(state, payload, ctx)  # nothing to compare: no call
    pending = [f["fact"] for f in state.facts.values() if f["synthesis"] == "pending"]
    if len(pending) >= ctx.pipeline.synthesis_min_facts or (pending and flush):
        ctx.request(state, TaskName.SYNTHESIS, synthesis_payload(state, ctx, pending[:SYNTHESIS_MAX_FACTS]))
        return
    if corrections.waiting(state, ctx):
        ctx.request(state, TaskName.CORRECTION, correction_payload(state, ctx))
        return
    refine.ask(state, ctx)  # the refinement loop, when its cadence is due and the scope is otherwise settled


def _score_transitions(state: ScopeState, ctx: StepContext) -> None:
    in_flight = {r.payload.get("entry_id") for r in state.pending_tasks(TaskName.PROMOTION)}
    due, instant, still = quiet.due_reflections(state, ctx)
    queued = corrections.queued_reflections(state)  # the correction task decides these, not a new promotion
    cap = ctx.pipeline.promotion_max_in_flight
    waiting = quiet.waiting_in_order(state, lambda: len(in_flight) < cap)
    for entry in heapq.merge(sorted(due, key=lambda e: e.id), waiting, key=lambda e: e.id):
        confirmed = confirm_by_score(entry, ctx.now, settings=ctx.memory)
        if confirmed is not None:
            ctx.put(state, confirmed, "transition", "threshold", entry)
            entry = confirmed
        if blocked_retry_due(entry, ctx.now, settings=ctx.memory):
            unblocked = unblock_promotion(entry, ctx.now)
            ctx.put(state, unblocked, "promotion_unblocked", "blocked_retry_time", entry)
            entry = unblocked
        if entry.id in in_flight or entry.id in queued:
            continue
        decision = promote_decision(entry, ctx.now, settings=ctx.memory)
        if decision in (NOT_DUE, WAIT) and state.entries.get(entry.id) is entry:
            if decision == NOT_DUE and time_cannot_move(entry, ctx.now, settings=ctx.memory):
                still[entry.id] = entry  # nothing to do at any later instant until the entry changes
            else:
                instant[entry.id] = entry  # nothing to do at this instant until the entry changes
        if decision == BLOCK:
            ctx.put(state, block_promotion(entry, ctx.now), "transition", "promote_attempts_exhausted", entry)
        elif decision == ATTEMPT and len(in_flight) >= cap:
            # Asked once an answer frees a place: the state holds a bounded number of promotion payloads.
            quiet.wait_for_place(state, entry)
        elif decision == ATTEMPT:
            in_flight.add(entry.id)
            attempted, ticket = record_promote_attempt(entry, ctx.now)
            ctx.put(state, attempted, "promote_attempt", "threshold", entry)
            ctx.request(state, TaskName.PROMOTION, promotion_payload(state, attempted, ctx, ticket))
