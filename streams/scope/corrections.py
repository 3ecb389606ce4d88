"""Correction work (the origin's correction loop, kept where it loses nothing).

A synthesised reflection or a persona-creating promotion on the topic of an active persona entry, or a
synthesis saying the opposite of an open reflection on its topic, is queued against that entry's id
instead of becoming a second entry. The correction task decides up to ``memory.correction_batch_size``
queued items in one call: merge, keep_new, keep_old or keep_both. Decisions are applied from the result
record in the scope's order; a failed call is dead-lettered and its reflections become promote_blocked.

Each decision's rules, and what differs from the origin: docs/design/scope.md ("Correction work").
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from credence.streams.scope import restate
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import OPEN_REFLECTION_STATUSES
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.entries import Entry, kept_text, rewrite_text
from credence.tables.lifecycle import MergeOutcome, apply_merge_decision, archive, block_promotion
from credence.tables.text import polarity_of, restatement_stems
from credence.tables.version_history import CORRECTION_KEEP_NEW, CORRECTION_MERGE

CAUSE = "correction"  # journal causes: correction_merge, correction_keep_new, correction_keep_old, ...


def topic_overlap(a: str, b: str) -> float:
    """The share of the smaller side's stems (predicate kind included) that the other side has too."""
    sa, sb = restatement_stems(a), restatement_stems(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / min(len(sa), len(sb))


def _target(entry: Entry | None, text: str | None = None) -> bool:
    """An entry a correction may change: an active, non-protected persona entry; with ``text`` (a
    synthesised statement) also an open reflection that ``text`` contradicts (the other polarity)."""
    if entry is None or entry.protected:
        return False
    if entry.kind == "persona":
        return entry.status == "active"
    return entry.status in OPEN_REFLECTION_STATUSES and text is not None and polarity_of(text) != polarity_of(entry.text)


def similar_entry(state: ScopeState, text: str, ctx: StepContext, reflections: bool = False) -> Entry | None:
    """The entry closest in topic to ``text``, at or over the threshold: an active, non-protected persona
    entry, or with ``reflections`` also an open reflection ``text`` contradicts."""
    if not ctx.memory.correction_work_enabled:
        return None
    best, best_overlap = None, ctx.memory.correction_topic_overlap
    for entry in sorted(state.entries.values(), key=lambda e: e.id):
        if not _target(entry, text if reflections else None):
            continue
        overlap = topic_overlap(entry.text, text)
        if overlap >= best_overlap and (best is None or overlap > topic_overlap(best.text, text)):
            best, best_overlap = entry, overlap
    return best


def queued_reflections(state: ScopeState) -> set[str]:
    return {item["reflection_id"] for item in state.corrections if "draft" not in item}


def queue(state: ScopeState, reflection: Entry, target: Entry, ctx: StepContext) -> None:
    """Queue the reflection's promotion as a correction against ``target``; the same pair once only."""
    key = f"{state.scope}\x1f{reflection.id}\x1f{target.id}"
    item_id = "c-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    if any(item["id"] == item_id for item in state.corrections):
        return
    state.corrections.append({"id": item_id, "target_id": target.id, "reflection_id": reflection.id, "asked": 0})
    ctx.log.append(f"promotion of {reflection.id} queued as correction {item_id} against {target.id}")


def queue_draft(state: ScopeState, reflection: Entry, target: Entry, ctx: StepContext) -> None:
    """Queue a synthesised reflection, not yet an entry, as a correction against ``target``: the item
    holds its snapshot, created (or not) by the decision."""
    key = f"{state.scope}\x1f{reflection.id}\x1f{target.id}"
    item_id = "c-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    if any(item["id"] == item_id for item in state.corrections):
        return
    state.corrections.append({"id": item_id, "target_id": target.id, "reflection_id": reflection.id,
                              "draft": reflection.to_dict(), "asked": 0})
    ctx.log.append(f"synthesis of {reflection.id} queued as correction {item_id} against {target.id}")


def waiting(state: ScopeState, ctx: StepContext) -> bool:
    return ctx.powerful and bool(state.corrections) and not state.pending_tasks(TaskName.CORRECTION)


def handle(state: ScopeState, payload: dict, output: dict, ctx: StepContext) -> None:
    asked = {c["id"] for c in payload.get("corrections", [])}
    decided = {d["id"]: d for d in output.get("decisions", []) if d.get("id") in asked}
    for item in [i for i in state.corrections if i["id"] in asked]:
        decision = decided.get(item["id"])
        if decision is None:
            item["asked"] += 1
            if item["asked"] < ctx.pipeline.max_request_failures:
                continue  # the model left it out: asked again with the next batch
            decision = {"action": "keep_both", "text": ""}  # never answered: the promotion's own create
        state.corrections.remove(item)
        _decide(state, item, decision.get("action", "keep_both"), decision.get("text") or "", ctx)


def _decide(state: ScopeState, item: dict, action: str, text: str, ctx: StepContext) -> None:
    if "draft" in item:
        _decide_draft(state, item, action, text, ctx)
        return
    reflection = state.entries.get(item["reflection_id"])
    if reflection is None or reflection.kind != "reflection" or reflection.status != "confirmed":
        ctx.log.append(f"correction {item['id']} dropped: {item['reflection_id']} is no longer confirmed")
        return
    target = state.entries.get(item["target_id"])
    if target is None or target.kind != "persona" or target.status != "active" or target.protected:
        action = "keep_both"  # the old entry left meanwhile: nothing to correct, the promotion goes ahead
    source_fact = reflection.source_fact_ids[-1] if reflection.source_fact_ids else None
    if action == "merge":
        if not text or not restate.admit(ctx, TaskName.CORRECTION, text):
            text = reflection.text  # the fused wording is unreadable alone: the new statement stands
        outcome = apply_merge_decision(reflection, MergeOutcome("merge", target.id, text), ctx.now, target=target,
                                       settings=ctx.memory)
        persona = kept_text(target, outcome.persona, ctx.now, reason=CORRECTION_MERGE, source_fact_id=source_fact,
                            settings=ctx.memory)
    elif action == "keep_old":
        outcome, persona = apply_merge_decision(reflection, MergeOutcome("reject", None, ""), ctx.now), None
    else:
        outcome = apply_merge_decision(reflection, MergeOutcome("create", None, reflection.text), ctx.now,
                                       settings=ctx.memory)
        persona = outcome.persona
        if action == "keep_new":
            persona = kept_text(target, persona, ctx.now, reason=CORRECTION_KEEP_NEW, source_fact_id=source_fact,
                                settings=ctx.memory)
    cause = f"{CAUSE}_{action}"
    if action == "keep_new":
        # Archived with its history, never deleted: the journal and the archive keep every word of it.
        ctx.archive(state, archive(target, ctx.now), target, f"{cause}:{persona.id}")
    if persona is not None:
        ctx.put(state, persona, "merged", cause, state.entries.get(persona.id))
    ctx.put(state, outcome.reflection, "transition" if persona is not None else "promotion_rejected", cause,
            reflection)


def _decide_draft(state: ScopeState, item: dict, action: str, text: str, ctx: StepContext) -> None:
    """A synthesised reflection against a persona entry: merge rewrites the entry (its facts joined);
    keep_new creates the reflection and archives the entry, its text opening the reflection's history;
    keep_both creates it; keep_old drops it (the entry stands, the facts are done)."""
    draft = Entry.from_dict(item["draft"])
    if draft.id in state.entries:
        ctx.log.append(f"correction {item['id']} dropped: {draft.id} exists already")
        return
    target = state.entries.get(item["target_id"])
    if not _target(target, draft.text):
        action = "keep_both"
    source_fact = draft.source_fact_ids[-1] if draft.source_fact_ids else None
    cause = f"{CAUSE}_{action}"
    if action == "keep_old":
        ctx.refuse(TaskName.CORRECTION, "keep_old", f"{draft.text} (against {target.id})")
        return
    if action == "merge":
        if not text or not restate.admit(ctx, TaskName.CORRECTION, text):
            text = draft.text
        merged = rewrite_text(target, text, ctx.now, reason=CORRECTION_MERGE, source_fact_id=source_fact,
                              settings=ctx.memory)
        facts = tuple(dict.fromkeys((*merged.source_fact_ids, *draft.source_fact_ids)))
        ctx.put(state, replace(merged, source_fact_ids=facts), "merged", cause, target)
        return
    if action == "keep_new":
        draft = kept_text(target, draft, ctx.now, reason=CORRECTION_KEEP_NEW, source_fact_id=source_fact,
                          settings=ctx.memory)
        ctx.archive(state, archive(target, ctx.now), target, f"{cause}:{draft.id}")
    ctx.put(state, draft, "created", cause)


def given_up(state: ScopeState, payload: dict, ctx: StepContext) -> None:
    """The call failed for good (dead-lettered with its payload): its items leave the queue and their
    reflections are promote_blocked, so the promotion's own retry rules bring them back later."""
    asked = {c["id"] for c in payload.get("corrections", [])}
    for item in [i for i in state.corrections if i["id"] in asked]:
        state.corrections.remove(item)
        if "draft" in item:  # never an entry: it becomes one as synthesis wrote it, nothing lost
            _decide_draft(state, item, "keep_both", "", ctx)
            continue
        reflection = state.entries.get(item["reflection_id"])
        if reflection is not None and reflection.kind == "reflection" and reflection.status == "confirmed":
            ctx.put(state, block_promotion(reflection, ctx.now), "transition", f"{CAUSE}_failed", reflection)
