"""Applying LLM results to a scope: facts, signals, new reflections, feedback, rebuttals, promotion."""

from __future__ import annotations

from credence.streams.llm import tasks
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import reflection_id
from credence.streams.scope.state import ScopeState
from credence.tables.entries import Entry, new_reflection, record_signal
from credence.tables.lifecycle import (
    MergeDecision,
    PromotionTicket,
    apply_merge_decision,
    deny,
    promotion_is_current,
)
from credence.tables.scope import Scope

FEEDBACK_SIGNAL = {"confirm": "user_confirm", "deny": "user_deny", "ignore": "user_ignore"}


def apply(state: ScopeState, kind: str, record: dict, ctx: StepContext) -> None:
    req = state.requests.get(record.get("request_id", ""))
    if req is None:
        ctx.log.append(f"stale result {record.get('request_id')} discarded (not in flight)")
        return
    if kind == "failed" and req.task == "promotion":
        # The attempt was counted before the call: drop it, so the throttle schedules the next one and
        # repeated failures end in promote_blocked instead of being re-sent on every step for ever.
        del state.requests[req.id]
        ctx.log.append(f"promotion request {req.id} failed ({record.get('error', '?')}); counted as an attempt")
        return
    if kind == "failed":
        req.failures += 1
        req.failed = True  # re-issued on the scope's next step; facts stay unprocessed, nothing advances
        ctx.log.append(f"{req.task} request {req.id} failed ({record.get('error', '?')}); will retry")
        return
    del state.requests[req.id]
    HANDLERS[req.task](state, req.payload, record.get("output") or {}, ctx)
    state.trim_facts()


def _stage1(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    for fact in output.get("facts", []):
        if state.knows_fact(fact["id"]):
            continue  # the same statement extracted again (content-derived id)
        user = fact.get("origin", "user") == "user"
        state.facts[fact["id"]] = {
            "fact": fact,
            # AI-origin facts never enter Stage-2 or synthesis: model output never reinforces itself.
            "stage2": "pending" if user and ctx.powerful else "skipped",
            "synthesis": ("after_stage2" if ctx.powerful else "pending") if user else "none",
        }


def _stage2(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    asked = {f["id"] for f in payload["facts"]}
    offered = {o["id"] for o in payload["observations"]}
    matched: set[str] = set()
    for c in output.get("classifications", []):
        entry = state.entries.get(c["observation_id"])
        # Only the candidates offered count: never protected, terminal or net-negative entries.
        if c["fact_id"] not in asked or c["observation_id"] not in offered or entry is None:
            continue
        kind = "user_fact_reinforce" if c["relation"] == "reinforce" else "user_fact_negate"
        ctx.put(state, record_signal(entry, kind, ctx.now, settings=ctx.memory), "signal", kind, entry)
        matched.add(c["fact_id"])
    for fact_id in asked:
        fact = state.facts.get(fact_id)
        if fact is None:
            continue
        fact["stage2"] = "done"
        if fact["synthesis"] == "after_stage2":
            # A fact that bears on an existing observation is evidence, not a new observation.
            fact["synthesis"] = "done" if fact_id in matched else "pending"


def _synthesis(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    facts = {f["id"]: f for f in payload["facts"]}
    scope = Scope.parse(state.scope)
    for draft in output.get("drafts", []):
        sources = [facts[i] for i in draft.get("source_fact_ids", []) if i in facts]
        if not sources or not draft.get("text", "").strip():
            continue
        entry_id = reflection_id(state.scope, draft["text"])
        if entry_id in state.entries:
            continue
        entry = new_reflection(
            entry_id, scope, draft["text"], ctx.now, subject=draft.get("subject", ""),
            importance=max(f["importance"] for f in sources),
            source_fact_ids=[f["id"] for f in sources],
            source_fact_importances=[f["importance"] for f in sources], settings=ctx.memory,
        )
        ctx.put(state, entry, "created", "synthesis")
    for fact_id in facts:
        if fact_id in state.facts:
            state.facts[fact_id]["synthesis"] = "done"


def apply_feedback(state: ScopeState, entry: Entry, decision: str, ctx: StepContext, cause_prefix: str) -> None:
    """confirm / deny / ignore one entry. Feedback on a reflection already promoted goes to the persona
    entry it became: that is where the observation lives now."""
    kind = FEEDBACK_SIGNAL[decision]
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
        if d["id"] in asked and entry is not None and d["decision"] in FEEDBACK_SIGNAL:
            apply_feedback(state, entry, d["decision"], ctx, cause_prefix="surfaced")


def _target(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    asked = {o["id"] for o in payload["observations"]}
    for entry_id in output.get("ids", []):
        entry = state.entries.get(entry_id)
        if entry_id in asked and entry is not None:
            updated = record_signal(entry, "negative_keyword", ctx.now, settings=ctx.memory)
            ctx.put(state, updated, "signal", "negative_keyword", entry)


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
    decision = MergeDecision(d.get("action", "reject"), d.get("target_id"), d.get("text") or None)
    step_ = apply_merge_decision(stored, decision, ctx.now, target=target)
    if step_.persona is not None:
        before = state.entries.get(step_.persona.id)
        # Both outcomes are merge-on-promote writes of a persona entry (the funnel's "merged").
        ctx.put(state, step_.persona, "merged", f"promotion_{decision.action}", before)
    ctx.put(state, step_.reflection, "transition" if step_.persona else "promotion_rejected",
            f"promotion_{decision.action}", stored)


# Keyed by the task registry's names (credence.streams.llm.tasks.TASKS), the one place they are spelled.
HANDLERS = {tasks.STAGE1: _stage1, tasks.STAGE2: _stage2, tasks.SYNTHESIS: _synthesis, tasks.FEEDBACK: _feedback,
            tasks.TARGET: _target, tasks.PROMOTION: _promotion}
