"""One batch of input records: each scope's records applied in order to its live state, collecting the
effects (records to send, LLM requests, changed entries) that the agent commits once for the batch.

A step that raises leaves nothing of itself behind: the scope is read back from the tables (which hold
the state before the batch) and the batch's earlier records of that scope are applied again with the
same inputs (`now`, switch, worker run), which gives the same state and effects, since a step is
deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import orjson

from credence.errors import RecordError
from credence.records.control import ControlRecord
from credence.records.inputs import Input, InputRecord
from credence.records.kind import ANSWERS, Kind
from credence.records.topics import TOPICS, TopicSpec
from credence.streams.scope.context import FACTS_KIND, Emit, StepContext
from credence.streams.scope.scope_state import Request
from credence.streams.scope.step import event_now, step
from credence.streams.state import codec
from credence.streams.state.store import Live, ScopeStore

log = logging.getLogger(__name__)
RELEASE = "release"  # not a step: a result that could not be applied gives its request up
# In-process answers applied after one record, at most; past it (a loop of requests raising requests, a
# bug) the rest go to the runner and come back through the result topics.
MAX_INLINE_ANSWERS = 64


@dataclass(frozen=True)
class Applied:
    """One input as it was applied, enough to apply it again identically."""

    kind: str
    record: InputRecord | dict  # typed, as the step reads it; a release's {"request_id"} is never stepped
    now: datetime
    powerful: bool
    position: str  # topic:partition
    offset: int
    turn: bool  # a turn record: counted in the scope's turns


@dataclass
class ScopeWork:
    live: Live
    partition: int
    tenant: str  # the scope's tenant, as its input carried it: the per-tenant counters read it
    applied: list[Applied] = field(default_factory=list)
    emits: list[Emit] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)  # entry ids written or deleted
    refused: dict[str, int] = field(default_factory=dict)  # statements refused by stage:reason (/metrics)
    # id of an emit or request -> the trace context of the step that made it (only while tracing is on)
    traced: dict[int, object] = field(default_factory=dict)
    journal: list[dict] = field(default_factory=list)  # the evidence records among the emits, in order
    # the scope has no work left after its last record applied (None: none applied); kept here so that the
    # commit marks it busy or idle without reading the scope's state again
    idle: bool | None = None


@dataclass
class Sends:
    """Records that are not a scope's effects (dead letters, forwarded inputs), sent with the batch."""

    # (topic, key, value, the input partition whose record made it: its state commits it)
    items: list[tuple[TopicSpec, bytes | None, bytes, int]] = field(default_factory=list)
    # input records sent on to their scope's partition: (topic, key, value, partition, origin, the
    # record's trace context headers)
    forwards: list[tuple[TopicSpec, bytes, bytes, int, tuple, dict]] = field(default_factory=list)

    def add(self, topic: TopicSpec, key: bytes | None, value: bytes, source: int) -> None:
        self.items.append((topic, key, value, source))

    def forward(self, topic: TopicSpec, key: bytes, value: bytes, partition: int, origin: tuple,
                trace: dict | None = None) -> None:
        self.forwards.append((topic, key, value, partition, origin, trace or {}))


MakeContext = Callable[[str, datetime, bool], StepContext]  # (scope, now, powerful)


def apply(work: ScopeWork, item: Applied, make_context: MakeContext) -> StepContext:
    """Apply one input to the live state and collect its effects. Raises whatever the step raises."""
    state = work.live.state
    if item.kind in (RELEASE, *ANSWERS):
        # answered (an in-process backend, within the batch) or given up: nothing to send to the runner
        work.requests = [r for r in work.requests if r.id != item.record.get("request_id")]
    if item.kind == RELEASE:
        state.requests.pop(item.record["request_id"], None)
        state.applied[item.position] = item.offset
        work.applied.append(item)
        work.idle = state.idle
        return make_context(state.scope, item.now, item.powerful)
    if item.turn:
        state.turns += 1
    ctx = make_context(state.scope, item.now, item.powerful)
    step(state, item, ctx)
    work.idle = state.idle
    state.applied[item.position] = item.offset
    work.applied.append(item)
    work.emits.extend(ctx.emits)
    work.requests.extend(ctx.requests)
    work.log.extend(ctx.log)
    for key, n in ctx.refused.items():
        work.refused[key] = work.refused.get(key, 0) + n
    for e in ctx.emits:
        if e.topic == TOPICS.evidence:
            work.journal.append(e.record)
            # A facts event (stage2_dropped, facts_failed) names no entry: nothing to write or delete for it.
            if e.record.get("entry_kind") != FACTS_KIND:
                work.changed.add(e.record["entry_id"])
    return ctx


def apply_within(work: ScopeWork, item: Applied, make_context: MakeContext, limit: int) -> StepContext:
    """`apply`, or RecordError when the item made a record over `limit` bytes (the broker's): the scope's
    control value or a record its step emitted. Raised like a step that fails, so the caller rebuilds
    the scope without the item and dead-letters it with the reason before anything of it is sent (sent, it
    would halt the partition on every restart)."""
    start = len(work.emits)
    ctx = apply(work, item, make_context)
    key = len(work.live.state.scope.encode())
    sizes = [("the scope's state", key + len(codec.encode_control(work.live.state)))]
    sizes += [(f"its {e.topic.name} record", key + len(orjson.dumps(e.record))) for e in work.emits[start:]]
    over = next(((what, size) for what, size in sizes if size > limit), None)
    if over is not None:
        work.applied.pop()  # a rebuild must not apply it again
        raise RecordError(f"{over[0]} would be a {over[1]}-byte record, over the {limit}-byte record limit "
                          "(CREDENCE_KAFKA__MAX_RECORD_BYTES)")
    return ctx


def is_idle_tick(work: ScopeWork, item: Applied, make_context: MakeContext) -> bool:
    """A tick that would change nothing (no effects, same control value): it is not applied at all, so
    an idle scope's ticks write nothing (and a redelivered one is harmless)."""
    if item.kind != Kind.TICK:
        return False
    state = work.live.state
    before = codec.encode_control(state)
    probe = Live(codec.decode_control(before).state)
    probe.state.entries = dict(state.entries)
    ctx = make_context(state.scope, item.now, item.powerful)
    step(probe.state, item, ctx)
    return not ctx.emits and not ctx.requests and codec.encode_control(probe.state) == before


def rebuild(store: ScopeStore, scope: str, work: ScopeWork, make_context: MakeContext) -> ScopeWork:
    """The scope as the tables hold it plus this batch's inputs before the one that failed."""
    store.discard(scope)
    fresh = ScopeWork(store.live(scope), work.partition, work.tenant)
    for item in work.applied:
        apply(fresh, item, make_context)
    return fresh


class Refusals(Protocol):
    """Where a batch's refused records go (runtime/dead_letters.py)."""

    def reject(self, sends: Sends, event, reason: str) -> None: ...

    def add(self, sends: Sends, topic: str, partition: int, offset: int, key: bytes | None,
            original: bytes | None, reason: str) -> None: ...


class Answers(Protocol):
    """The LLM runner as a batch sees it: whether it answers in the process, and its answer."""

    inline: bool

    async def answer(self, scope: str, req: Request) -> dict: ...


@dataclass(frozen=True)
class Stepping:
    """What a batch applies its records with: the step context, the scopes' stored state (for a rebuild),
    where refusals go, the record limit, the control topic's name and the in-process answers."""

    make_context: MakeContext
    store: ScopeStore
    dlq: Refusals
    limit: int  # the broker's record limit, in bytes
    control: str  # the control topic's name: an in-process answer refused is dead-lettered as one of its
    runner: Answers | None

    async def step(self, work: dict[str, ScopeWork], sends: Sends, event, item: Input, applied: Applied) -> None:
        """Apply one record to its scope's work (and an in-process backend's answers); a record the step
        refuses is dead-lettered and the scope rebuilt without it."""
        msg, scope_work = event.message, work[item.scope]
        try:
            if is_idle_tick(scope_work, applied, self.make_context):  # a refused tick is dead-lettered
                return
            apply_within(scope_work, applied, self.make_context, self.limit)
        except Exception as exc:  # noqa: BLE001
            # A record the domain refuses (or a bug) must not stop the partition: the scope keeps the
            # state it had before this record, and the record goes whole to the DLQ with the reason. A
            # result that cannot be applied also releases its request, or the scope would wait forever.
            log.exception("step failed for %s on %s", item.scope, msg.topic)
            self.dlq.reject(sends, event, f"could not apply to scope {item.scope}: {type(exc).__name__}: {exc}")
            scope_work = work[item.scope] = rebuild(self.store, item.scope, scope_work, self.make_context)
            request_id = item.record.request_id if item.kind in ANSWERS else ""
            if item.kind in ANSWERS and request_id in scope_work.live.state.requests:
                apply(scope_work, Applied(RELEASE, {"request_id": request_id}, applied.now, applied.powerful,
                                          applied.position, msg.offset, False), self.make_context)
            return
        if self.runner is not None and self.runner.inline:
            work[item.scope] = await self.answer_inline(sends, work[item.scope], item.scope, applied)

    async def answer_inline(self, sends: Sends, scope_work: ScopeWork, scope: str, asked: Applied) -> ScopeWork:
        """An in-process backend's answers, applied right after the record that asked (and the requests
        those answers raise, in order), at that record's position (docs/state.md says why)."""
        for _ in range(MAX_INLINE_ANSWERS):
            state = scope_work.live.state
            req = next((r for r in scope_work.requests if r.id in state.requests), None)
            if req is None:
                break
            record = ControlRecord.decode(orjson.dumps(await self.runner.answer(scope, req)))
            answer = Applied(record.kind, record, event_now(state, None) or asked.now, asked.powerful,
                             asked.position, asked.offset, False)
            try:
                apply_within(scope_work, answer, self.make_context, self.limit)
            except Exception as exc:  # noqa: BLE001 - as for a result read from the log: DLQ, release
                log.exception("step failed for %s on an in-process %s answer", scope, req.task)
                self.dlq.add(sends, self.control, scope_work.partition, asked.offset, scope.encode(),
                             orjson.dumps(dict(record)), f"could not apply to scope {scope}: {type(exc).__name__}: {exc}")
                scope_work = rebuild(self.store, scope, scope_work, self.make_context)
                apply(scope_work, Applied(RELEASE, {"request_id": req.id}, answer.now, answer.powerful,
                                          asked.position, asked.offset, False), self.make_context)
        return scope_work
