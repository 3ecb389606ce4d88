"""Factories for the per-scope pipeline tests: a scope driven through `step()` and a tiny pump that runs
every emitted LLM request through the deterministic rules backend and feeds the result back.

Time is always a fixed instant passed in; no clock is read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.config.usage import UsageSettings
from credence.records.inputs import Application
from credence.records.kind import Kind
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.runner import execute
from credence.streams.scope.context import Emit, StepContext
from credence.streams.scope.scope_state import Request, ScopeState
from credence.streams.scope.step import event_now, step
from credence.tables.clock import format_instant
from credence.tables.entries import new_persona_entry
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE_KEY = "acme/u1/aria"
CANDIDATE_ID = "p-candidate"

_LOOP = asyncio.new_event_loop()
_BACKEND = RulesBackend()


def run_request(req: Request) -> dict:
    """The rules backend's output for one request, exactly as the runner would produce it."""
    return _LOOP.run_until_complete(execute(_BACKEND, req.task, req.payload))


@dataclass
class Driver:
    """One scope fed like the agent feeds it: ctx.now = event_now(state, record time), results at the clock."""

    state: ScopeState
    memory: MemorySettings
    pipeline: PipelineSettings
    powerful: bool = True
    usage: UsageSettings = field(default_factory=UsageSettings)
    boot: str = "boot-1"
    auto: bool = True  # pump every request as soon as it is issued
    emits: list[Emit] = field(default_factory=list)
    issued: list[Request] = field(default_factory=list)  # every request handed out (re-issues included)
    outbox: list[Request] = field(default_factory=list)  # handed out, not yet answered by the pump
    log: list[str] = field(default_factory=list)
    turn_seq: int = 0
    _pumping: bool = False

    # -- inputs ----------------------------------------------------------------------------------------
    def step(self, kind: str, record: dict, at: datetime | None = None) -> StepContext:
        now = event_now(self.state, at) or T0
        ctx = StepContext(now=now, powerful=self.powerful, boot=self.boot, memory=self.memory,
                          pipeline=self.pipeline, usage=self.usage)
        step(self.state, Application(Kind(kind), record), ctx)
        self.emits += ctx.emits
        self.issued += ctx.requests
        self.outbox += ctx.requests
        self.log += ctx.log
        if self.auto:
            self.pump()
        return ctx

    def turn(self, text: str, at: datetime, role: str = "user", surfaced_ids: list[str] | None = None,
             turn_id: str | None = None) -> StepContext:
        self.turn_seq += 1
        record = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria",
                  "turn_id": turn_id or f"t{self.turn_seq}", "role": role, "text": text,
                  "ts": format_instant(at)}
        if surfaced_ids is not None:
            record["surfaced_ids"] = surfaced_ids
        return self.step("turn", record, at)

    def flush(self) -> StepContext:
        return self.step("flush", {"type": "flush"})

    def tick(self, at: datetime) -> StepContext:
        return self.step("tick", {"type": "tick", "now": format_instant(at)}, at)

    def feedback(self, entry_id: str, decision: str, at: datetime, feedback_id: str = "fb1") -> StepContext:
        record = {"v": 1, "feedback_id": feedback_id, "entry_id": entry_id, "decision": decision,
                  "ts": format_instant(at), "tenant": "acme", "user": "u1", "character": "aria"}
        return self.step("feedback", record, at)

    def result(self, req: Request, output: dict) -> StepContext:
        return self.step("result", {"request_id": req.id, "task": req.task, "output": output})

    def fail(self, req: Request, error: str = "boom", transient: bool = False) -> StepContext:
        record = {"request_id": req.id, "task": req.task, "error": error}
        return self.step("failed", record | ({"transient": True} if transient else {}))

    # -- the pump --------------------------------------------------------------------------------------
    def pump(self) -> None:
        """Answer every outstanding request (and the ones the answers cause) through the rules backend."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self.outbox:
                req = self.outbox.pop(0)
                if req.id not in self.state.requests:
                    continue  # answered already (a re-issue of an applied request)
                self.step("result", {"request_id": req.id, "task": req.task, "output": run_request(req)})
        finally:
            self._pumping = False

    def pump_one(self) -> Request:
        """Answer only the oldest outstanding request (its consequences stay in the outbox)."""
        while True:
            req = self.outbox.pop(0)
            if req.id in self.state.requests:
                break
        auto, self.auto = self.auto, False
        try:
            self.step("result", {"request_id": req.id, "task": req.task, "output": run_request(req)})
        finally:
            self.auto = auto
        return req

    # -- looking at what came out ----------------------------------------------------------------------
    def with_candidate(self) -> Driver:
        """An unrelated active persona entry held before the first turn, so Stage-2 has a candidate to
        compare (with none, the step skips the call) and tests of the Stage-2 request see one issued."""
        entry = new_persona_entry(CANDIDATE_ID, Scope.parse(self.state.scope), "The user's name is Kim.", T0,
                                  subject="name")
        self.state.entries[entry.id] = entry
        return self

    def journal(self) -> list[dict]:
        return [e.record for e in self.emits if e.topic.name == "evidence"]

    def archives(self) -> list[dict]:
        return [e.record for e in self.emits if e.topic.name == "archive"]

    def requests_of(self, task: str) -> list[Request]:
        return [r for r in self.issued if r.task == task]

    def reflections(self) -> list:
        return sorted((e for e in self.state.entries.values() if e.kind == "reflection"), key=lambda e: e.id)

    def personas(self) -> list:
        return sorted((e for e in self.state.entries.values() if e.kind == "persona"), key=lambda e: e.id)


@pytest.fixture
def memory_factory():
    def make(**overrides) -> MemorySettings:
        return MemorySettings(**overrides)

    return make


@pytest.fixture
def pipeline_factory():
    def make(**overrides) -> PipelineSettings:
        return PipelineSettings(**overrides)

    return make


@pytest.fixture
def state_factory():
    def make(scope: str = SCOPE_KEY, **fields) -> ScopeState:
        return ScopeState(scope=scope, **fields)

    return make


@pytest.fixture
def driver_factory(state_factory, memory_factory, pipeline_factory):
    """A scope driven through step(); `auto=False` leaves requests unanswered until `pump()`."""

    def make(*, state: ScopeState | None = None, memory: MemorySettings | None = None,
             pipeline: PipelineSettings | None = None, **kw) -> Driver:
        return Driver(state=state or state_factory(), memory=memory or memory_factory(),
                      pipeline=pipeline or pipeline_factory(), **kw)

    return make
