"""What a step knows besides the state (now, switch, settings) and what it collects (effects)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.config.usage import DEFAULT_USAGE_SETTINGS, UsageSettings
from credence.errors import CredenceError
from credence.records.dead_letter import dead_letter
from credence.records.journal import FACTS_KIND, archive_record, event_id, evidence_record
from credence.records.topics import TOPICS, TopicSpec
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.clock import format_instant
from credence.tables.entries import Entry
from credence.tables.evidence import derived_tier
from credence.tables.scope import Scope
from credence.tables.validity import means_differently, supersede

# What became of a request's facts (dropped after switch-off, failed for good) is journalled in the entry
# events' envelope under FACTS_KIND, so every reader of credence.evidence parses it; readers that fold
# entries skip it.
FACT_EVENTS = ("stage2_dropped", "facts_failed")
ENTRY_EVENTS = ("created", "signal", "transition", "merged", "promote_attempt", "promotion_rejected",
                "promotion_unblocked", "promotion_dropped", "archived", "mention", "sweep", "suppression_lifted",
                "invalidated", "usage", "restored", "consensus",
                "imported", "erased", "edited")
# Every journal event a step can emit; docs/records.md lists each one (tests/unit/scope/test_records_doc.py).
JOURNAL_EVENTS = ENTRY_EVENTS + FACT_EVENTS


@dataclass
class Emit:
    topic: TopicSpec  # TOPICS.evidence, TOPICS.archive, TOPICS.dlq
    record: dict


@dataclass
class StepContext:
    now: datetime
    powerful: bool
    boot: str
    memory: MemorySettings
    pipeline: PipelineSettings
    emits: list[Emit] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)  # to run after the state is saved
    log: list[str] = field(default_factory=list)
    usage: UsageSettings = DEFAULT_USAGE_SETTINGS
    refused: dict[str, int] = field(default_factory=dict)  # "<stage>:<reason>" -> texts refused (/metrics)
    incarnation: int = 0  # the stepped scope's (ScopeState.incarnation), journalled with every record
    # texts -> one unit vector each, a function of the text alone (embeddings.TextVectors), when embeddings
    # are on (refine clusters); None otherwise
    vectors: Callable[[list[str]], Sequence[Sequence[float]]] | None = None

    def refuse(self, stage: str, reason: str, text: str) -> None:
        """A text that never became a fact or an entry: counted by stage and reason, and logged."""
        key = f"{stage}:{reason}"
        self.refused[key] = self.refused.get(key, 0) + 1
        self.log.append(f"{stage} statement refused ({reason}): {text[:120]!r}")

    # -- the journal: every evidence or lifecycle change goes out with the entry's full snapshot --------
    def put(self, state: ScopeState, entry: Entry, event: str, cause: str, before: Entry | None = None) -> None:
        if before is not None and entry == before:
            return
        if entry.id not in state.entries and entry.id in state.archived:
            # Re-created after archival under its deterministic id: continue the archived version line, so
            # "<id>@<version>" never names two snapshots and a newest-version-wins replay keeps the live one.
            entry = replace(entry, version=state.archived.pop(entry.id) + entry.version)
        if before is not None and means_differently(before, entry):
            # A change of meaning never overwrites — the old meaning is journalled closed first.
            closed, entry = supersede(before, entry, self.now)
            self.journal(closed, "invalidated", "superseded", before)
        state.entries[entry.id] = entry
        state.touch(entry.id)
        self.journal(entry, event, cause, before)

    def journal(self, entry: Entry, event: str, cause: str, before: Entry | None = None) -> None:
        if event not in ENTRY_EVENTS:
            raise CredenceError(f"journal event {event!r} is not one of {ENTRY_EVENTS} (docs/records.md)")
        score = entry.score(self.now, settings=self.memory)
        finite = score if score not in (float("inf"), float("-inf")) else None
        self.emits.append(Emit(TOPICS.evidence, evidence_record(
            Scope(entry.tenant, entry.user, entry.character), entry_id=entry.id, entry_kind=entry.kind,
            event_id=event_id(entry.id, entry.version, self.incarnation), event=event, cause=cause,
            from_status=before.status if before is not None else None,
            to_status=entry.status if before is None or before.status != entry.status else None,
            at=self.now, score=finite,
            tier="protected" if entry.protected else derived_tier(score, settings=self.memory),
            entry=entry.to_dict(), incarnation=self.incarnation)))

    def journal_facts(self, state: ScopeState, req: Request, event: str, cause: str, fact_ids: list[str],
                      reason: str) -> None:
        """Journal what became of a request's facts, as one event in the entry events' envelope."""
        if event not in FACT_EVENTS:
            raise CredenceError(f"journal event {event!r} is not one of {FACT_EVENTS} (docs/records.md)")
        scope = Scope.parse(state.scope)
        # Deterministic, so a replay or re-send repeats it; the scope and facts are in it because the sink
        # de-duplicates event ids per partition, and request ids restart in a scope forgotten and begun again.
        key = "\x1f".join([state.scope, req.id, event, *fact_ids])
        subject = f"{FACTS_KIND}-" + hashlib.sha256(key.encode()).hexdigest()[:16]
        self.emits.append(Emit(TOPICS.evidence, evidence_record(
            scope, entry_id=subject, entry_kind=FACTS_KIND, event_id=event_id(subject, 1, self.incarnation),
            event=event, cause=cause, from_status=None, to_status=None, at=self.now, score=None, tier=None,
            entry={"id": subject, "kind": FACTS_KIND, **scope.fields(), "request_id": req.id, "task": req.task,
                   "fact_ids": list(fact_ids), "reason": reason, "version": 1}, incarnation=self.incarnation)))

    def archive(self, state: ScopeState, archived: Entry, before: Entry, reason: str) -> None:
        """Leave the active view: journal the transition, hand the snapshot to the archive topic, forget it
        here. The archive record and the removal are one step, so the entry is never in neither place."""
        self.journal(archived, "archived", reason, before)
        self.emits.append(Emit(TOPICS.archive, archive_record(
            Scope(archived.tenant, archived.user, archived.character), entry_id=archived.id,
            entry_kind=archived.kind, archived_at=self.now, reason=reason, entry=archived.to_dict(),
            incarnation=self.incarnation)))
        state.entries.pop(archived.id, None)
        state.touch(archived.id)
        state.archived[archived.id] = archived.version

    def dead_letter(self, state: ScopeState, req: Request, reason: str) -> None:
        """Hand a request that failed for good to the dead-letter topic, in the one credence.dlq envelope: the
        original is the request itself (scope, task, payload), enough to understand and re-send it."""
        original = json.dumps({"v": 1, "scope": state.scope, "request_id": req.id, "task": req.task,
                               "payload": req.payload, "failures": req.failures,
                               "issued_at": format_instant(req.issued_at)}, ensure_ascii=False).encode()
        self.emits.append(Emit(TOPICS.dlq, json.loads(dead_letter(
            topic=f"request:{req.task}", partition=-1, offset=-1, reason=reason, original=original, at=self.now))))

    def request(self, state: ScopeState, task: TaskName, payload: dict) -> Request:
        req = Request(id=state.next_id(task), task=task, payload=payload, issued_at=self.now, boot=self.boot)
        state.requests[req.id] = req
        self.requests.append(req)
        return req

    def reissue(self, req: Request) -> None:
        req.boot, req.failed, req.retry_at = self.boot, False, None
        self.requests.append(req)
