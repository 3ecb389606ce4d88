"""Runs a scope's LLM requests in the background and posts each result back onto the scope's log.

The agent never awaits a model server: it saves the request in the scope's state, and this runner's answer
(or failure) arrives later as a record keyed by the scope — Stage-1 facts on credence.facts, everything
else on credence.control — so results are applied in the scope's order, by its one owner. A backend that
computes in the worker's own process (rules) is asked inside the batch instead (`answer`, called by the
agent's `answer_inline`; `llm.inline_in_process`): its answer is ready at once, and the result topics'
round trip would only hold the scope. Results go out through a producer of their own (`ResultSender`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import Protocol

import orjson
from aiokafka import AIOKafkaProducer
from pydantic import ValidationError

from credence import tracing
from credence.config import Settings
from credence.errors import CredenceError, LLMError, LLMUnavailable
from credence.kafka import client_options, producer_max_request_size, start
from credence.records.kind import Kind
from credence.records.topics import TOPICS, TopicSpec
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.embeddings import mark_similar, rank_by_similarity, text_vectors
from credence.streams.llm.tasks import TASKS
from credence.streams.scope.tasks import TaskName
from credence.tables.scope import Scope

log = logging.getLogger(__name__)

Send = Callable[[TopicSpec, str, dict], Awaitable[None]]  # (topic, scope, record)


class Request(Protocol):
    """What the runner reads of a scope's open request (scope.scope_state.Request): the layer below the scope
    steps names only the fields a call needs."""

    id: str
    task: TaskName
    payload: dict


class ResultSender:
    """`Send` for the runner: each result acknowledged (acks=all) before the call returns, on the scope's
    partition (given explicitly: never a partitioner's choice), through a producer of its own, started on
    the first result and stopped with the worker.

    Its own, because a producer has one produce request in flight per broker, and the agent's batches
    (emits, redo record, table writes: three acknowledged requests each) keep Faust's busy: a result queued
    behind them waited for all of it, while its scope waited for the result. On one broker that was ~1.4x
    on long scopes' throughput (docs/benchmarks.md, Throughput)."""

    def __init__(self, settings: Settings, bootstrap: str, partition_of: Callable[[str], int],
                 encode: Callable[[dict], bytes]) -> None:
        self._settings, self._bootstrap = settings, bootstrap
        self._partition_of, self._encode = partition_of, encode
        self._producer: AIOKafkaProducer | None = None
        self._starting = asyncio.Lock()

    async def __call__(self, topic: TopicSpec, scope: str, record: dict) -> None:
        producer = self._producer or await self._start()
        # the current span's trace context rides along: the step applying the result continues the trace
        fut = await producer.send(self._settings.topic(topic), key=scope.encode(), value=self._encode(record),
                                  partition=self._partition_of(scope), headers=tracing.aiokafka_headers())
        await fut

    async def _start(self) -> AIOKafkaProducer:
        async with self._starting:
            if self._producer is None:
                kafka = self._settings.kafka
                extra = {"compression_type": kafka.compression_type} if kafka.compression_type != "none" else {}
                producer = AIOKafkaProducer(**client_options(self._bootstrap, kafka, acks="all",
                                                             max_request_size=producer_max_request_size(kafka), **extra))
                await start(producer, self._bootstrap, kafka)
                self._producer = producer
        return self._producer

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()


async def execute(backend: LLMBackend, task: TaskName, p: dict, encode=None) -> dict:
    """One request's LLM work through the task registry, typed in and out. `encode` (optional)
    re-orders Stage-2 candidates by embedding similarity before the token caps cut the list."""
    spec = TASKS.get(task)
    if spec is None:
        raise CredenceError(f"unknown LLM task {task!r}; known: {', '.join(sorted(TASKS))}")
    async def rank(facts, obs):
        return await asyncio.to_thread(rank_by_similarity, encode, list(facts), list(obs))

    try:
        payload = spec.payload.model_validate(p)
    except ValidationError as exc:
        raise LLMError(f"LLM task {task}: the request payload does not validate: {exc}") from exc
    answer = await spec.run(backend, spec.prompts[0], payload, rank if encode is not None else None)
    out = answer.model_dump()
    if task == TaskName.SYNTHESIS and encode is not None:
        await asyncio.to_thread(mark_similar, encode, out["drafts"], p.get("related", []),
                                p.get("restatement_cosine"))
    return out


class Runner:
    def __init__(self, backend: LLMBackend, send: Send, max_inflight: int, encode=None, inline: bool = False,
                 max_record_bytes: int | None = None, observe: Callable[[str, str, float], None] | None = None):
        self.backend = backend
        self.max_record_bytes = max_record_bytes  # a larger result is reported as a failure, never sent
        self.encode = encode
        self.vectors = text_vectors(encode)  # the scope step's (refine clusters): one text at a time, cached
        self.send = send
        self.slots = asyncio.Semaphore(max_inflight)
        self.tasks: set[asyncio.Task] = set()
        # scope -> its requests being answered here, until their result is on the scope's log: a tick
        # cannot re-issue any of them (same run, not failed, no back-off), so none is sent for them
        self.running: Counter[str] = Counter()
        self.observe = observe  # (task, outcome, seconds) of each call: /metrics
        # A backend that computes in this process (rules) answers inside the agent's batch (agent.py,
        # `answer_inline`): its answer is a pure function of the request, so a network round trip through
        # the result topics would only hold the scope.
        self.inline = inline and backend.in_process

    @property
    def inflight(self) -> int:
        return len(self.tasks)

    def submit(self, scope: str, req: Request) -> None:
        # the task runs in a copy of the caller's context: the trace of the step that asked, if any
        self.running[scope] += 1
        task = asyncio.ensure_future(self._run(scope, req))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer(self, scope: str, req: Request) -> dict:
        """The request's result (or failure) record, as it would be posted to the scope's log."""
        parsed = Scope.parse(scope)
        head = {"v": 1, **parsed.fields(), "request_id": req.id, "task": req.task}
        started = time.perf_counter()
        with self._span(req.task, parsed.tenant) as span:
            try:
                record = head | {"type": Kind.RESULT.value,
                                 "output": await execute(self.backend, req.task, req.payload, self.encode)}
            except Exception as exc:  # noqa: BLE001 - any failure is reported to the scope, never lost
                log.warning("LLM %s for %s failed: %s", req.task, scope, exc)
                # transient: the backend was unavailable, not refusing the request; the scope keeps its facts
                # waiting for a later attempt instead of dead-lettering them (scope/results.py).
                record = head | {"type": Kind.FAILED.value, "error": str(exc)[:500],
                                 "transient": isinstance(exc, LLMUnavailable)}
                tracing.failed(span, exc)
            size = len(orjson.dumps(record)) if self.max_record_bytes else 0
            if size > (self.max_record_bytes or 0):
                # Failed like a call that raised: retried, then dead-lettered with this reason by the scope.
                log.warning("LLM %s for %s: a %d-byte result, over the record limit", req.task, scope, size)
                record = head | {"type": Kind.FAILED.value, "error": f"the result is a {size}-byte record, over the "
                                                            "record limit (CREDENCE_KAFKA__MAX_RECORD_BYTES)"}
            if span is not None:
                span.set_attribute("credence.llm.outcome", record["type"])
        if self.observe is not None:
            self.observe(req.task, record["type"], time.perf_counter() - started)
        return record

    def _span(self, task: TaskName, tenant: str):
        """The span of one request's LLM work (in process or not); a null context when tracing is off."""
        if not tracing.active():
            return nullcontext()
        return tracing.span(f"credence.llm {task}", attributes={
            "credence.llm.task": task, "credence.tenant": tenant,
            "credence.llm.in_process": bool(getattr(self.backend, "in_process", False))})

    async def _run(self, scope: str, req: Request) -> None:
        try:
            async with self.slots:  # the call's latency is measured inside the slot, not the queueing
                record = await self.answer(scope, req)
            topic = TOPICS.facts if req.task == TaskName.STAGE1 and record["type"] == Kind.RESULT else TOPICS.control
            try:
                await self.send(topic, scope, record)
            except Exception:  # noqa: BLE001
                # The request stays in the scope's state and is re-issued on a later step.
                log.exception("could not post the %s result for %s", req.task, scope)
        finally:
            self.running[scope] -= 1
            if self.running[scope] <= 0:
                del self.running[scope]

    def waiting(self, scope: str, requests: int) -> bool:
        """Whether some of the scope's `requests` open requests are not being answered here."""
        return requests > self.running.get(scope, 0)
