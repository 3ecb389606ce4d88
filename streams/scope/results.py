"""Applying LLM results to a scope: facts, signals, new reflections, feedback, rebuttals, promotion."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

from credence.records.control import ControlRecord
from credence.records.kind import Kind
from credence.streams.scope import corrections, erase, quiet, recent, refine, requests, restate, turn_status
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import reflection_id
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.clock import format_instant
from credence.tables.entries import Entry, changed, kept_text, new_reflection, record_signal
from credence.tables.evidence import FEEDBACK_SIGNALS, NEGATIVE_KEYWORD, RELATION_SIGNALS, USER_DENY, USER_FACT_NEGATE
from credence.tables.lifecycle import (
    MergeOutcome,
    PromotionTicket,
    apply_merge_decision,
    archive,
    deny,
    promotion_is_current,
    unblock_promotion,
    withdraw_promote_attempt,
)
from credence.tables.origin import fact_origin
from credence.tables.scope import Scope
from credence.tables.tags import union
from credence.tables.version_history import PROMOTION_MERGE

FORGET_REQUEST = "forget_request"  # the journal cause of what a user's forget request took out (":<turn id>")
# Decisions the powerful-memory switch turns off: their results are dropped once it is off.
SWITCHED_TASKS = (TaskName.STAGE2, TaskName.PROMOTION, TaskName.CORRECTION, TaskName.REFINE)


def apply(state: ScopeState, kind: Kind, record: ControlRecord, ctx: StepContext) -> None:
    req = state.requests.get(record.request_id)
    if req is None:
        ctx.log.append(f"stale result {record.request_id} discarded (not in flight)")
        return
    if not ctx.powerful and req.task in SWITCHED_TASKS:
        drop_switched_off(state, req, ctx)
        return
    if kind == Kind.FAILED and req.task == TaskName.PROMOTION:
        # The attempt was counted before the call: drop it, so the throttle schedules the next one and
        # repeated failures end in promote_blocked instead of being re-sent on every step for ever.
        del state.requests[req.id]
        ctx.log.append(f"promotion request {req.id} failed ({record.error}); counted as an attempt")
        return
    if kind == Kind.FAILED:
        req.failures += 1
        if req.failures >= ctx.pipeline.max_request_failures:
            if record.transient:
                _wait_for_backend(state, req, record.error, ctx)
            else:
                _give_up(state, req, record.error, ctx)
            return
        req.failed = True  # re-issued on the scope's next step; facts stay unprocessed, nothing advances
        ctx.log.append(f"{req.task} request {req.id} failed ({record.error}); will retry")
        return
    del state.requests[req.id]
    SCOPE_TASKS[req.task].handle(state, req.payload, record.output, ctx)
    if req.task == TaskName.SUMMARISE:
        return  # lands wherever latency puts it, and the memo is apart from the evidence: it unblocks nothing
    state.trim_facts()
    for waiting in state.requests.values():
        if waiting.retry_at is not None:  # the backend answers again: no need to sit out the back-off
            ctx.reissue(waiting)
    if ctx.powerful and ctx.memory.promote_blocked_retry_on_healthy_backend:
        _retry_blocked(state, ctx)


def _retry_blocked(state: ScopeState, ctx: StepContext) -> None:
    """A successful LLM result on the scope, in the scope's order, means the backend is healthy again:
    promotions blocked by failures get a fresh series of attempts."""
    for entry in quiet.promote_blocked(state):
        ctx.put(state, unblock_promotion(entry, ctx.now), "promotion_unblocked", "backend_healthy", entry)


def _wait_for_backend(state: ScopeState, req, error: str, ctx: StepContext) -> None:
    """Past max_request_failures with the backend unavailable (not refusing this request): the request
    stays, its facts still eligible, and waits for a back-off in the scope's event time (retry_due). The
    first time, its facts are journalled as facts_failed; the result that finally comes supersedes it."""
    over = min(req.failures - ctx.pipeline.max_request_failures, 20)
    wait = min(ctx.pipeline.failed_request_retry_seconds * 2 ** over, ctx.pipeline.failed_request_retry_max_seconds)
    req.failed, req.retry_at = False, ctx.now + timedelta(seconds=wait)
    reason = (f"{req.task} request failed {req.failures} times (max_request_failures), the backend unavailable; "
              f"last error: {error}; retried from {format_instant(req.retry_at)} or when the backend answers")
    waiting = [f["id"] for f in req.payload.get("facts", []) if f["id"] in state.facts]
    if over == 0 and waiting:
        ctx.journal_facts(state, req, "facts_failed", "max_request_failures", waiting, reason)
    ctx.log.append(f"{req.task} request {req.id} waits: {reason}")


def retry_due(req, now, timeless_tick: bool) -> bool:
    """A waiting request goes out again once its back-off passed in event time, or on a tick that carries
    no time (a replay's ticks: event time there moves only with the records, so the tick paces it)."""
    return req.retry_at is not None and (timeless_tick or now >= req.retry_at)


def _give_up(state: ScopeState, req, error: str, ctx: StepContext) -> None:
    """Past max_request_failures: dead-letter the request with its payload, mark its facts failed and let
    the scope move on (it no longer waits for a call that never succeeds)."""
    del state.requests[req.id]
    failed = []
    for fact in req.payload.get("facts", []):
        held = state.facts.get(fact["id"])
        if held is None:
            continue
        was = (held["stage2"], held["synthesis"])
        held["stage2"] = "failed" if held["stage2"] == "pending" else held["stage2"]
        held["synthesis"] = "failed" if held["synthesis"] in ("pending", "after_stage2") else held["synthesis"]
        if (held["stage2"], held["synthesis"]) != was:
            failed.append(fact["id"])
    reason = (f"{req.task} request failed {req.failures} times (max_request_failures); last error: {error}"
              + (f"; facts marked failed: {', '.join(failed)}" if failed else ""))
    ctx.dead_letter(state, req, reason)
    if req.task == TaskName.CORRECTION:
        corrections.given_up(state, req.payload, ctx)
    if failed:
        # The dead letter holds the request; the journal is where a fact's fate is looked up.
        ctx.journal_facts(state, req, "facts_failed", "max_request_failures", failed, reason)
    ctx.log.append(f"{req.task} request {req.id} dead-lettered: {reason}")
    state.trim_facts()


def drop_switched_off(state: ScopeState, req, ctx: StepContext) -> None:
    """A Stage-2 or promotion request issued while powerful memory was on, answered (or failed, or lost
    with a worker) after it went off: the seed turns those decisions off, so its result is dropped unread
    and what it was about takes the "off" path. Stage-2 facts go straight to synthesis (journalled as
    stage2_dropped, with their ids); a promotion's attempt is withdrawn (journalled as promotion_dropped)
    and the age-driven fallback takes over."""
    del state.requests[req.id]
    ctx.log.append(f"{req.task} request {req.id} dropped: powerful memory is off")
    if req.task == TaskName.CORRECTION:
        return  # its items stay queued: decided once the switch is back on (the origin's queue does too)
    if req.task == TaskName.REFINE:
        return  # nothing was changed for it: the cluster is asked again in a pass with the switch on
    if req.task == TaskName.STAGE2:
        skipped = []
        for fact in req.payload["facts"]:
            held = state.facts.get(fact["id"])
            if held is not None and held["stage2"] == "pending":
                held["stage2"] = "skipped"
                held["synthesis"] = "pending" if held["synthesis"] == "after_stage2" else held["synthesis"]
                skipped.append(fact["id"])
        ctx.journal_facts(state, req, "stage2_dropped", "switch_off", skipped,
                          f"stage2 request {req.id} was issued while powerful memory was on and ended after it "
                          "went off: its result is dropped unread and its facts skip Stage-2 for synthesis")
        return
    stored = state.entries.get(req.payload["entry_id"])
    t = req.payload["ticket"]
    if stored is not None and promotion_is_current(stored, PromotionTicket(stored.id, t["version"], t["attempt"])):
        ctx.put(state, withdraw_promote_attempt(stored, ctx.now), "promotion_dropped", "switch_off", stored)


def _stage1(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    turns = {t["id"]: t for t in payload["turns"]}
    for fact in output.get("facts", []):
        if state.knows_fact(fact["id"]):
            continue  # the same statement extracted again (content-derived id)
        if not restate.admit(ctx, TaskName.STAGE1, fact.get("text", "")):
            continue  # either backend's output: a fact nobody could read alone never becomes one
        # A user fact only if the backend did not call it the AI's and every content-bearing turn it
        # cites is a user turn (an AI question answered "yes" is the user's; an AI statement is not).
        cited = fact_origin(fact.get("source_turn_ids", []), turns, settings=ctx.memory)
        fact = {**fact, "origin": "ai" if fact.get("origin") == "ai" else cited}
        user = fact["origin"] == "user"
        tags = union(*(turns[t].get("tags", ()) for t in fact.get("source_turn_ids", []) if t in turns))
        state.facts[fact["id"]] = ({"tags": list(tags)} if tags else {}) | {
            "fact": fact,
            # AI-origin facts never enter Stage-2 or synthesis: model output never reinforces itself.
            "stage2": "pending" if user and ctx.powerful else "skipped",
            "synthesis": ("after_stage2" if ctx.powerful else "pending") if user else "none",
            "said_at": erase.said_at(fact.get("source_turn_ids", []), turns),  # a deleted entry's guard
        }


def _stage2(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    facts = {f["id"]: f for f in payload["facts"]}
    asked = set(facts)
    offered = {o["id"] for o in payload["observations"]}
    matched: set[str] = set()
    for c in output.get("classifications", []):
        entry = state.entries.get(c["observation_id"])
        # Only the candidates offered count: never protected, terminal or net-negative entries.
        if c["fact_id"] not in asked or c["observation_id"] not in offered or entry is None:
            continue
        kind = RELATION_SIGNALS.get(c["relation"])
        if kind is None:
            continue
        ctx.put(state, record_signal(entry, kind, ctx.now, settings=ctx.memory), "signal", kind, entry)
        turn_status.touched_by(state, [facts[c["fact_id"]]], entry.id)
        if kind != USER_FACT_NEGATE or facts[c["fact_id"]]["polarity"] != "positive":
            matched.add(c["fact_id"])  # a new value ("lives in Lisbon") that negates the old is both
    for fact_id in asked:
        fact = state.facts.get(fact_id)
        if fact is None:
            continue
        fact["stage2"] = "done"
        if fact["synthesis"] == "after_stage2":
            # A fact that bears on an existing observation is evidence, not a new observation.
            fact["synthesis"] = "done" if fact_id in matched else "pending"


def without_candidates(state: ScopeState, payload: dict, ctx: StepContext) -> None:
    """A Stage-2 batch with no candidate to compare: what any answer over an empty pool decides (every
    fact is a new observation, on to synthesis), without asking."""
    _stage2(state, payload, {}, ctx)


def _synthesis(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    facts = {f["id"]: f for f in payload["facts"]}
    scope = Scope.parse(state.scope)
    for draft in output.get("drafts", []):
        sources = [facts[i] for i in draft.get("source_fact_ids", []) if i in facts]
        if not sources or not draft.get("text", "").strip():
            continue
        entry_id = reflection_id(state.scope, draft["text"])
        if entry_id in state.entries or not restate.admit(ctx, TaskName.SYNTHESIS, draft["text"]):
            continue
        if erase.held_back(state, entry_id, [f["id"] for f in sources]):
            ctx.refuse(TaskName.SYNTHESIS, "deleted by the user", draft["text"])  # said before the delete
            continue
        twin = restate.restated_by(draft["text"], restate.live_statements(state), ctx.memory) \
            or restate.live(state, draft.get("similar_to"))  # the runner's cosine check, embeddings on
        if twin is not None:
            # Never twice: an observation the scope already holds (or wrote from this same answer).
            _restated(state, twin, draft["text"], sources, ctx)
            turn_status.touched_by(state, sources, twin.id)
            continue
        entry = new_reflection(
            entry_id, scope, draft["text"], ctx.now, subject=draft.get("subject", ""),
            importance=max(f["importance"] for f in sources),
            source_fact_ids=[f["id"] for f in sources],
            source_fact_importances=[f["importance"] for f in sources], settings=ctx.memory,
            tags=turn_status.tags_of(state, sources),
        )
        similar = corrections.similar_entry(state, entry.text, ctx, reflections=True) if ctx.powerful else None
        if similar is not None:  # on a persona entry's topic: correction work decides it against that entry
            corrections.queue_draft(state, entry, similar, ctx)
            continue
        cause = erase.REMEMBER_CAUSE if erase.remembered(state, [f["id"] for f in sources]) else "synthesis"
        ctx.put(state, entry, "created", cause)
        turn_status.touched_by(state, sources, entry.id)
    for fact_id in facts:
        if fact_id in state.facts:
            state.facts[fact_id]["synthesis"] = "done"


def _restated(state: ScopeState, twin: Entry, text: str, sources: list[dict], ctx: StepContext) -> None:
    """A draft restating a live entry is declined; when the entry is an open reflection and the draft says
    more ("learning French" then "learning French with a tutor"), the reflection takes the richer text
    (its old meaning journalled closed) and the draft's facts as sources."""
    ctx.refuse(TaskName.SYNTHESIS, "restatement", f"{text} (restates {twin.id})")
    if twin.kind != "reflection" or restate.richer(twin.text, text) == twin.text:
        return
    facts = tuple(f["id"] for f in sources if f["id"] not in twin.source_fact_ids)
    updated = changed(twin, ctx.now, text=text, source_fact_ids=(*twin.source_fact_ids, *facts),
                      tags=union(twin.tags, turn_status.tags_of(state, sources)))
    ctx.put(state, updated, "merged", "synthesis_restated", twin)


def apply_feedback(state: ScopeState, entry: Entry, decision: str, ctx: StepContext, cause_prefix: str) -> None:
    """confirm / deny / ignore one entry. Feedback on a reflection already promoted goes to the persona
    entry it became: that is where the observation lives now."""
    kind = FEEDBACK_SIGNALS[decision]
    if entry.kind == "reflection" and entry.status == "promoted" and entry.merged_into_id in state.entries:
        entry = state.entries[entry.merged_into_id]
    updated = record_signal(entry, kind, ctx.now, settings=ctx.memory)
    if decision == "deny" and updated.kind == "reflection":
        updated = deny(updated, ctx.now)
    ctx.put(state, updated, "signal", f"{cause_prefix}:{kind}" if cause_prefix != "surfaced" else kind, entry)


def _feedback(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    asked = {o["id"] for o in payload["surfaced"]}
    for d in output.get("decisions", []):
        entry = state.entries.get(d["id"])
        if d["id"] in asked and entry is not None and d["decision"] in FEEDBACK_SIGNALS:
            apply_feedback(state, entry, d["decision"], ctx, cause_prefix="surfaced")


def _target(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    asked = {o["id"] for o in payload["observations"]}
    if output.get("forget"):
        _forget(state, [i for i in output.get("ids", []) if i in asked], payload.get("turn_id"), ctx)
        return
    if payload.get("forget_only"):
        return  # nominated by a forget word, and no forget request: nothing the user took back
    promoting = {r.payload["entry_id"] for r in state.pending_tasks(TaskName.PROMOTION)}
    for entry_id in output.get("ids", []):
        entry = state.entries.get(entry_id)
        if entry_id in asked and entry is not None:
            updated = record_signal(entry, NEGATIVE_KEYWORD, ctx.now, settings=ctx.memory)
            if entry_id in promoting:
                # The user rebutted an observation on its way into the persona: it is denied, and the
                # promotion's result then finds it changed and is discarded (no persona entry, no merge).
                updated = deny(updated, ctx.now)
            ctx.put(state, updated, "signal", NEGATIVE_KEYWORD, entry)


def _forget(state: ScopeState, ids: list[str], turn_id: str | None, ctx: StepContext) -> None:
    """The user asked to forget these: each leaves the memory block at once, journalled with the request
    (its turn) as the cause. A reflection is denied (a user_deny signal, status denied); a persona entry
    leaves the active view for the archive. Protected entries are never offered, so never forgotten."""
    cause = f"{FORGET_REQUEST}:{turn_id}" if turn_id else FORGET_REQUEST
    for entry_id in ids:
        entry = state.entries.get(entry_id)
        if entry is None or entry.protected or entry.status in ("denied", "archived", "promoted"):
            continue
        disputed = record_signal(entry, USER_DENY, ctx.now, settings=ctx.memory)
        if entry.kind == "reflection":
            ctx.put(state, deny(disputed, ctx.now), "signal", cause, entry)
        else:
            ctx.archive(state, archive(disputed, ctx.now), entry, cause)


def _promotion(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    stored = state.entries.get(payload["entry_id"])
    t = payload["ticket"]
    ticket = PromotionTicket(payload["entry_id"], t["version"], t["attempt"])
    if stored is None or not promotion_is_current(stored, ticket):
        ctx.log.append(f"late promotion result for {payload['entry_id']} discarded (entry changed meanwhile)")
        return
    d = output.get("decision") or {}
    target = state.entries.get(d.get("target_id") or "")
    if d.get("action") == "merge" and (target is None or target.kind != "persona" or target.status != "active"
                                       or target.protected):
        ctx.log.append(f"merge target {d.get('target_id')} no longer active; promotion of {stored.id} rejected")
        return
    text = d.get("text") or None
    if text is not None and not restate.admit(ctx, TaskName.PROMOTION, text):
        text = None  # the merge's own wording is unreadable alone: the reflection's (or target's) text stands
    decision = MergeOutcome(d.get("action", "reject"), d.get("target_id"), text)
    if decision.action == "create":
        decision, target = _merge_into_twin(state, stored, decision, ctx)
    if decision.action == "create" and ctx.powerful:
        similar = corrections.similar_entry(state, decision.text or stored.text, ctx)
        if similar is not None:  # correction work decides it against that entry, not a second entry
            corrections.queue(state, stored, similar, ctx)
            return
    step_ = apply_merge_decision(stored, decision, ctx.now, target=target, settings=ctx.memory)
    if step_.persona is not None:
        before = state.entries.get(step_.persona.id)
        # A merge's rewrite keeps the text it replaced; a new entry keeps what its reflection replaced.
        persona = kept_text(target, step_.persona, ctx.now, reason=PROMOTION_MERGE, settings=ctx.memory) \
            if target is not None else replace(step_.persona, version_history=stored.version_history)
        # Both outcomes are merge-on-promote writes of a persona entry (the funnel's "merged").
        ctx.put(state, persona, "merged", f"promotion_{decision.action}", before)
    # A rejection is final for this version of the reflection (journalled as promotion_rejected).
    ctx.put(state, step_.reflection, "transition" if step_.persona else "promotion_rejected",
            f"promotion_{decision.action}", stored)


def _merge_into_twin(state: ScopeState, reflection: Entry, decision: MergeOutcome, ctx: StepContext):
    """A "create" whose text restates an active persona entry (one promoted earlier in the same batch
    included: the state already holds it) merges into that entry instead, keeping the richer text."""
    text = decision.text or reflection.text
    personas = [e for e in state.entries.values()
                if e.kind == "persona" and e.status == "active" and not e.protected]
    twin = restate.restated_by(text, personas, ctx.memory)
    if twin is None:
        return decision, None
    ctx.log.append(f"promotion of {reflection.id} restates {twin.id}: merged into it instead of a new entry")
    return MergeOutcome("merge", twin.id, restate.richer(twin.text, text)), twin


Handler = Callable[[ScopeState, dict, dict, StepContext], None]  # (state, payload, output, ctx)


@dataclass(frozen=True)
class ScopeTask:
    """The scope's side of one LLM task (credence.streams.llm.tasks.TASKS holds the call's side): the builder
    of its payload from the scope's state (requests.py) and the handler that applies its output here."""

    build: Callable[..., dict]
    handle: Handler


SCOPE_TASKS: dict[TaskName, ScopeTask] = {
    TaskName.STAGE1: ScopeTask(requests.stage1_payload, _stage1),
    TaskName.STAGE2: ScopeTask(requests.stage2_payload, _stage2),
    TaskName.SYNTHESIS: ScopeTask(requests.synthesis_payload, _synthesis),
    TaskName.FEEDBACK: ScopeTask(requests.feedback_payload, _feedback),
    TaskName.TARGET: ScopeTask(requests.target_payload, _target),
    TaskName.PROMOTION: ScopeTask(requests.promotion_payload, _promotion),
    # The correction-work loops apply their answers in their own modules.
    TaskName.CORRECTION: ScopeTask(requests.correction_payload, corrections.handle),
    TaskName.REFINE: ScopeTask(requests.refine_payload, refine.apply),
    TaskName.SUMMARISE: ScopeTask(requests.summarise_payload, recent.apply_answer),
}
