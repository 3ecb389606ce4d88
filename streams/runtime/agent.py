"""The scope agent: the one owner of every scope on its partitions.

It reads the input topics (all keyed by scope, co-partitioned) in batches, begins a transaction on the
worker's state per batch (streams/state/transaction.py), asks it per record whether and where the record
applies, applies it by the pure step (batch.py), and commits the transaction with every record the batch
emitted; then the LLM requests go to the runner, and only after that are the offsets committed. The
guarantees and the order behind them: docs/state.md.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson

from credence import tracing
from credence.config import Settings
from credence.config.memory import MemorySettings
from credence.errors import RecordError
from credence.kafka import send_now
from credence.records.inputs import Input, decode_input
from credence.records.kind import ACTS_ON_STATE, Kind
from credence.records.topics import INPUTS, TOPICS, TopicSpec
from credence.streams.llm.runner import Runner
from credence.streams.runtime import rewinds
from credence.streams.runtime.batch import Applied, MakeContext, ScopeWork, Sends, Stepping
from credence.streams.runtime.dead_letters import DeadLetters
from credence.streams.runtime.forwards import Origin, duplicate_id, header, origin_of
from credence.streams.runtime.probe import OffsetProbe
from credence.streams.runtime.tenancy import Switch
from credence.streams.runtime.topics import Topics
from credence.streams.runtime.traces import carried, emit, stepped
from credence.streams.scope.context import StepContext
from credence.streams.scope.step import event_now
from credence.streams.state.marks import received_at
from credence.streams.state.positions import APPLY, SEEN
from credence.streams.state.transaction import Transaction, WorkerState, set_current_event

if TYPE_CHECKING:
    from credence.streams.runtime.container import Stats

log = logging.getLogger(__name__)
encode_record = orjson.dumps  # a record as the worker sends it


def halt(reason: str) -> None:
    """Stop the process without committing the batch's offsets: they are committed after the batch (even
    when it raises), so a batch whose records or state could not be made durable must never return. The
    next run re-reads it from the last committed offsets."""
    log.critical("halting the worker: %s", reason)
    logging.shutdown()
    os._exit(70)


class ScopeAgent:
    def __init__(self, settings: Settings, topics: Topics, state: WorkerState, switch: Switch, stats: Stats, *,
                 memory_for: Callable[[str], MemorySettings] | None = None, runner: Runner | None = None,
                 consumer_of: Callable[[], object] | None = None, probe: OffsetProbe | None = None) -> None:
        self.settings, self.topics, self.state = settings, topics, state
        self.consumer_of = consumer_of  # () -> the Faust consumer: rewinds seek it
        self.probe = probe  # which offsets of a partition hold records
        self.switch, self.stats = switch, stats  # switch: per tenant (tenancy.py)
        self._powerful: dict[str, bool] = {}  # tenant -> the switch, read once per batch (a file stat each)
        self.boot = uuid.uuid4().hex[:12]
        self.by_name = {settings.topic(spec): spec for spec in INPUTS}  # full topic name -> its spec
        self.control = settings.topic(TOPICS.control)  # an in-process answer refused is dead-lettered as one
        self.runner = runner  # asks the scopes' LLM requests
        # tenant -> the evidence settings its scopes are stepped with (tenancy.TenantMemory)
        self.memory_for = memory_for or (lambda tenant: settings.memory)
        self.dlq = DeadLetters(settings, stats)
        self._stepping: dict[str, Stepping] = {}  # tenant -> how its records are stepped

    async def send(self, topic: TopicSpec, scope: str, record: dict) -> None:
        """One record, acknowledged before this returns (the runner's results, the timers' ticks)."""
        channel = self.topics[topic]
        fut = await channel.send(key=scope.encode(), value=encode_record(record))
        send_now(getattr(channel, "app", None))
        await fut

    async def send_many(self, topic: TopicSpec, records: list[tuple[str, dict]]) -> None:
        """(scope, record) pairs, all queued first, then every acknowledgement awaited."""
        channel = self.topics[topic]
        futures = [await channel.send(key=scope.encode(), value=encode_record(record)) for scope, record in records]
        send_now(getattr(channel, "app", None))
        for fut in futures:
            await fut

    def context(self, tenant: str) -> MakeContext:
        """The step context of the tenant's scopes, with its evidence settings (read when a step asks)."""
        def make(scope: str, now: datetime, powerful: bool) -> StepContext:
            return StepContext(now=now, powerful=powerful, boot=self.boot, memory=self.memory_for(tenant),
                               pipeline=self.settings.pipeline, usage=self.settings.usage,
                               vectors=self.runner.vectors if self.runner is not None else None)
        return make

    # -- a batch ------------------------------------------------------------------------------------
    async def run(self, stream) -> None:
        state = self.settings.state
        async for events in stream.take_events(state.batch_max_records, within=state.batch_within_seconds):
            try:
                await self.batch(events)
            except BaseException as exc:  # noqa: BLE001 - cancelled mid-batch included, as in `commit`
                # Faust's supervisor would start this agent again in the same process, with the batch's
                # positions, marks and live scopes advanced in memory but never written: the records it
                # took would be skipped for good. The next run re-reads them instead.
                halt(f"a batch failed before it was made durable: {type(exc).__name__}: {exc}")

    async def batch(self, events) -> None:
        if not self.stats.first_input_at and events:
            self.stats.first_input_at = time.time()
        self._powerful.clear()
        tx, work, sends = self.state.begin(), {}, Sends()
        for event in events:
            msg = event.message
            if not tx.holds(msg.partition):
                self.stats.moved_away += 1
                continue
            set_current_event(event)  # table reads go to the record's partition
            verdict = await tx.verdict(msg.topic, msg.partition, msg.offset, self.probe)
            if verdict == SEEN:
                self.stats.redelivered += 1
            if verdict != APPLY:  # GAP: records before it never came, nothing after them is applied
                continue
            tx.reached(event)
            try:
                item = decode_input(self.by_name[event.message.topic], event.value)
            except RecordError as exc:
                tx.advance(msg.topic, msg.partition, msg.offset)
                self.dlq.reject(sends, event, str(exc))
                continue
            if item.kind == Kind.FORGET:
                await self.commit(tx, work, sends)
                tx, work, sends = self.state.begin(tx.holes), {}, Sends()
                tx.reached(event)
                set_current_event(event)
                await self.forget(tx, item, msg)
                continue
            # what the record's headers say (forwards.py) first: then one stretch of questions to the state
            origin, ident = origin_of(event, item.name), duplicate_id(event, item.topic, item.record)
            await self.take(tx, work, sends, event, item, origin, ident)
        await self.commit(tx, work, sends)
        for (topic, partition), offset in tx.holes.items():
            await rewinds.rewind(self.consumer_of, self.state, self.stats, topic, partition, offset)

    def forward(self, sends: Sends, event, item: Input, home: int, origin: Origin) -> None:
        """Send a record that arrived on a partition other than its scope's, or under another key, on to its
        scope's partition (forwards.py), or dead-letter it if the copy would be over the record limit; never
        apply it here: this partition's store lacks the scope, whose keys another changelog partition holds."""
        if self.dlq.forward(sends, event, item.topic, item.scope.encode(), home, origin, carried(event)):
            self.stats.records_forwarded += 1
            self.stats.turns_rekeyed += item.topic == TOPICS.turns and event.key != item.scope.encode()

    async def rewind_held(self, partitions: set[int]) -> None:
        await rewinds.rewind_held(self.consumer_of, self.state, list(self.by_name), partitions)

    async def take(self, tx: Transaction, work: dict[str, ScopeWork], sends: Sends, event, item: Input,
                   origin: Origin, ident: str | None) -> None:
        """Apply a decoded record to its scope's work, unless its user was forgotten after it was sent, its
        scope lives on another partition (forwarded there), or it is there already (`origin`, `ident`: its
        place and its duplicate id, forwards.py)."""
        msg = event.message
        tx.advance(msg.topic, msg.partition, msg.offset)
        if tx.forgotten(item.scope, msg.partition, origin):
            self.stats.records_forgotten += 1  # its user was forgotten after it was sent
            return
        home = tx.home(item.scope)
        if msg.partition != home or event.key != item.scope.encode():
            self.forward(sends, event, item, home, origin)
            return
        scope_work = work.get(item.scope)
        if scope_work is None:
            if item.kind in ACTS_ON_STATE and not tx.exists(item.scope):
                # Nothing to act on (a request answered after its user was forgotten): applying it would
                # create the scope again, empty.
                log.info("%s for %s ignored: the scope has no state", item.kind, item.scope)
                return
            live = tx.live(item.scope, item.prefix)
            scope_work = work[item.scope] = ScopeWork(live, msg.partition, item.tenant)
        state = scope_work.live.state
        position = f"{item.name}:{msg.partition}"
        if msg.offset <= state.applied.get(position, -1):
            self.stats.redelivered += 1
            return
        if ident is not None and not tx.first_time(item.name, item.scope, ident, f"{position}:{msg.offset}",
                                                      item.at or state.clock, received_at(msg)):
            self.stats.turns_duplicate += item.topic == TOPICS.turns
            self.stats.redelivered += item.topic not in (TOPICS.turns, TOPICS.feedback)  # a forward made again
            return
        applied = Applied(item.kind, item.record, event_now(state, item.at) or datetime.now(UTC),
                          self.powerful(item.tenant), position, msg.offset, item.topic == TOPICS.turns)
        await stepped(self.stepping(item.tenant).step(work, sends, event, item, applied), work, event, item)

    def stepping(self, tenant: str) -> Stepping:
        """The tenant's stepping, made at its first record (its settings are read when a step asks)."""
        if tenant not in self._stepping:
            self._stepping[tenant] = Stepping(self.context(tenant), self.state.store, self.dlq,
                                              self.settings.kafka.max_record_bytes, self.control, self.runner)
        return self._stepping[tenant]

    def powerful(self, tenant: str) -> bool:
        enabled = self._powerful.get(tenant)
        if enabled is None:
            enabled = self._powerful[tenant] = self.switch.enabled(tenant)
        return enabled

    async def commit(self, tx: Transaction, work: dict[str, ScopeWork], sends: Sends) -> None:
        """Hand every record the batch sends to its transaction and commit it (transaction.py: the order)."""
        turns = 0
        try:
            for item in sends.items:
                topic, key, value = self.dlq.bounded(*item[:3])
                tx.emit(item[3], self.topics[topic], key, value)
            for topic, key, value, partition, origin, trace in sends.forwards:
                tx.forward(self.topics[topic], key, value, partition, header(origin) | trace)
            for scope, scope_work in work.items():
                key = scope.encode()
                turns += self.stats.count_saved(scope_work)  # nothing applied counts nothing
                for e in scope_work.emits:
                    emit(tx, scope_work.partition, self.topics[e.topic], key,
                         encode_record(e.record), e, scope_work.traced.get(id(e)))
            await tx.commit(work)
            # counted once readable: a caller waiting on /status for its turns then finds their scopes
            self.stats.turns_accepted += turns
        except BaseException as exc:  # noqa: BLE001 - cancelled (stopping) mid-batch included
            halt(f"a batch could not be made durable: {type(exc).__name__}: {exc}")
        for scope, scope_work in work.items():
            for line in scope_work.log:
                log.info("%s: %s", scope, line)
            for req in scope_work.requests:
                with tracing.attached(scope_work.traced.get(id(req))):  # the runner's task inherits it
                    self.runner.submit(scope, req)

    async def forget(self, tx: Transaction, item: Input, msg) -> None:
        """Right to be forgotten: the user's scopes, entries and duplicate marks on this partition
        (docs/state.md: why each partition's copy of the request deletes its own keys)."""
        try:
            doomed, marks = await tx.forget(item.scope, (msg.topic, msg.partition, msg.offset),
                                            item.record.get("after"), [spec.name for spec in INPUTS])
        except BaseException as exc:  # noqa: BLE001
            halt(f"forgetting could not be made durable: {type(exc).__name__}: {exc}")
        self.stats.forgotten_scopes += len(doomed)
        log.info("forgot %s on partition %d: %d scopes, %d duplicate marks", item.scope, msg.partition,
                 len(doomed), marks)
