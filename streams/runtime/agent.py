"""The scope agent: the one owner of every scope on its partitions.

It reads turns, feedback, usage, facts and control records (all keyed by scope, co-partitioned) in batches
(`state.batch_max_records`, `state.batch_within_seconds`). Each record is applied in order to its
scope's live state by the pure step (with an in-process backend, each request's answer is applied right
after the record that asked: `answer_inline`); then, once per batch: every record the batch emitted (journal,
archive hand-off, dead letters, forwards) and each changed key are written, in one transaction per input
partition (writes.py, fence.py), then the LLM requests go to the runner, and only after that are the
batch's offsets committed. A crash before the commit re-runs the batch, and only the re-run's records are
ever read (readers are read_committed); with transactions off, its records are sent and acknowledged
before the state (at-least-once: the same ids again, downstream keeps the first). A state that was written
always has its records behind it — an archived entry is never in neither place. A redelivered record whose
offset the scope already applied is skipped.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import weakref
from collections.abc import Callable
from datetime import UTC, datetime

import orjson
from faust.streams import _current_event
from faust.types import TP

from credence import tracing
from credence.config import Settings
from credence.config.memory import MemorySettings
from credence.errors import RecordError
from credence.kafka import send_now
from credence.records.control import decode_control
from credence.records.inputs import Input, decode_input
from credence.records.kind import ACTS_ON_STATE, ANSWERS, Kind
from credence.records.topics import INPUTS, TOPICS, TopicSpec
from credence.streams.llm.runner import Runner
from credence.streams.runtime.batch import (
    RELEASE,
    Applied,
    ScopeWork,
    Sends,
    apply,
    apply_within,
    is_idle_tick,
    rebuild,
)
from credence.streams.runtime.dead_letters import DeadLetters
from credence.streams.runtime.forwards import duplicate_id, header, origin_of
from credence.streams.runtime.probe import OffsetProbe
from credence.streams.runtime.tenancy import Switch
from credence.streams.runtime.topics import Topics
from credence.streams.runtime.traces import carried, emit, stepped
from credence.streams.scope.context import StepContext
from credence.streams.scope.step import event_now
from credence.streams.state.forgets import Forgets
from credence.streams.state.marks import Marks, received_at
from credence.streams.state.ownership import Ownership
from credence.streams.state.positions import ASK, GAP, SEEN, Positions
from credence.streams.state.store import ScopeStore
from credence.streams.state.writes import TableWrites
from credence.tables.scope import tenant_of

log = logging.getLogger(__name__)
# In-process answers applied after one record, at most; past it (a loop of requests raising requests, a
# bug) the rest go to the runner and come back through the result topics.
MAX_INLINE_ANSWERS = 64


def encode_record(record: dict) -> bytes:
    return orjson.dumps(record)


def set_current_event(event) -> None:
    """Make `event` the current event of this task only. Faust writes a table key to the changelog
    partition of the current event and reads the local store of its partition; inside a batch there is
    none, so each scope's writes run with one of its own records current. The stream's own
    `current_event` attribute is left alone: `take_events` reads it to collect the next batch."""
    _current_event.set(weakref.ref(event))


def halt(reason: str) -> None:
    """Stop the process without committing the batch's offsets: they are committed after the batch (even
    when it raises), so a batch whose records or state could not be made durable must never return. The
    next run re-reads it from the last committed offsets."""
    log.critical("halting the worker: %s", reason)
    logging.shutdown()
    os._exit(70)


class ScopeAgent:
    def __init__(self, settings: Settings, topics: Topics, store: ScopeStore, marks: Marks, writes: TableWrites,
                 ownership: Ownership, switch: Switch, stats, positions: Positions, forgets: Forgets | None = None,
                 *, memory_for: Callable[[str], MemorySettings] | None = None, runner: Runner | None = None,
                 consumer_of: Callable[[], object] | None = None, probe: OffsetProbe | None = None) -> None:
        self.settings, self.topics, self.store, self.marks, self.writes = settings, topics, store, marks, writes
        self.positions = positions
        self.forgets = forgets or Forgets({}, writes, settings.topic)  # the app's are kept in `seen`
        self.consumer_of = consumer_of  # () -> the Faust consumer: rewinds seek it
        self.probe = probe  # which offsets of a partition hold records
        self.ownership, self.switch, self.stats = ownership, switch, stats  # switch: per tenant (tenancy.py)
        self._powerful: dict[str, bool] = {}  # tenant -> the switch, read once per batch (a file stat each)
        self.boot = uuid.uuid4().hex[:12]
        self.by_name = {settings.topic(spec): spec for spec in INPUTS}  # full topic name -> its spec
        self.runner = runner  # asks the scopes' LLM requests
        # scope -> the evidence settings it is stepped with (per tenant: tenancy.TenantMemory)
        self.memory_for = memory_for or (lambda scope: settings.memory)
        self.dlq = DeadLetters(settings, stats)

    async def send(self, topic: TopicSpec, scope: str, record: dict) -> None:
        """One record, acknowledged before this returns (the runner's results, the timers' ticks)."""
        channel = getattr(self.topics, topic.attribute)
        fut = await channel.send(key=scope.encode(), value=encode_record(record))
        send_now(getattr(channel, "app", None))
        await fut

    async def send_many(self, topic: TopicSpec, records: list[tuple[str, dict]]) -> None:
        """(scope, record) pairs, all queued first, then every acknowledgement awaited."""
        channel = getattr(self.topics, topic.attribute)
        futures = [await channel.send(key=scope.encode(), value=encode_record(record)) for scope, record in records]
        send_now(getattr(channel, "app", None))
        for fut in futures:
            await fut

    def context(self, scope: str, now: datetime, powerful: bool) -> StepContext:
        return StepContext(now=now, powerful=powerful, boot=self.boot, memory=self.memory_for(scope),
                           pipeline=self.settings.pipeline, usage=self.settings.usage,
                           vectors=self.runner.vectors if self.runner is not None else None)

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
        work: dict[str, ScopeWork] = {}
        sends = Sends()
        last: dict[int, object] = {}  # partition -> its last event in the batch
        holes: dict[tuple[str, int], int] = {}  # (topic, partition) -> the offset to rewind to
        for event in events:
            msg = event.message
            if msg.partition not in self.ownership.held:
                # Taken before a rebalance moved its partition away: the new owner reads it again from
                # the last committed offset. Applying it here would write the scope's keys beside the
                # new owner's (two writers on one changelog partition).
                self.stats.moved_away += 1
                continue
            set_current_event(event)  # table reads go to the record's partition
            verdict = await self.verdict(msg.topic, msg.partition, msg.offset)
            if verdict == SEEN:
                self.stats.redelivered += 1
                continue
            if verdict == GAP:  # records before this one never came: nothing after them is applied
                holes[(msg.topic, msg.partition)] = self.positions.expected(msg.topic, msg.partition)
                continue
            last[msg.partition] = event
            try:
                item = decode_input(self.by_name[event.message.topic], event.value)
            except RecordError as exc:
                self.positions.advance(msg.topic, msg.partition, msg.offset)
                self.dlq.reject(sends, event, str(exc))
                continue
            if item.kind == Kind.FORGET:
                await self.commit(work, sends, last)
                work, sends, last = {}, Sends(), {event.message.partition: event}
                set_current_event(event)
                self.forget(item.scope, msg.partition, item.record.get("after"), msg.offset)
                try:
                    await self.writes.flush()
                except BaseException as exc:  # noqa: BLE001
                    halt(f"forgetting could not be made durable: {type(exc).__name__}: {exc}")
                # Only now: a crash before this point must find the forget request still to apply.
                self.positions.advance(msg.topic, msg.partition, msg.offset)
                continue
            self.positions.advance(msg.topic, msg.partition, msg.offset)
            if self.forgets.queued_before(item.scope, msg.partition, origin_of(event, item.name)):
                self.stats.records_forgotten += 1  # its user was forgotten after it was sent
                continue
            home = self.ownership.partition_of(item.scope)
            if msg.partition != home or event.key != item.scope.encode():
                self.forward(sends, event, item, home)
                continue
            await self.take(work, sends, event, item)
        await self.commit(work, sends, last)
        for (topic, partition), offset in holes.items():
            await self.rewind(topic, partition, offset)

    def forward(self, sends: Sends, event, item: Input, home: int) -> None:
        """Send a record that arrived on a partition other than its scope's, or under another key, on to its
        scope's partition (forwards.py), or dead-letter it if the copy would be over the record limit; never
        apply it here: this partition's store lacks the scope, whose keys another changelog partition holds."""
        if self.dlq.forward(sends, event, item.topic, item.scope.encode(), home, origin_of(event, item.name),
                            carried(event)):
            self.stats.records_forwarded += 1
            self.stats.turns_rekeyed += item.topic == TOPICS.turns and event.key != item.scope.encode()

    async def verdict(self, topic: str, partition: int, offset: int) -> str:
        """positions.check's verdict on an input record; when offsets before it did not come, the broker
        says whether they hold records (a transaction marker or an aborted record holds none): GAP if it
        holds one the consumer skipped, or cannot tell."""
        verdict = self.positions.check(topic, partition, offset)
        if verdict == ASK and self.probe is not None:
            expected = self.positions.expected(topic, partition)
            self.positions.reported(topic, partition, expected,
                                    await self.probe.offsets_from(topic, partition, expected))
            verdict = self.positions.check(topic, partition, offset)
        return GAP if verdict == ASK else verdict

    async def rewind(self, topic: str, partition: int, offset: int) -> None:
        """Fetch (topic, partition) again from `offset`. Again after every batch that still brought
        records past the hole: Faust drops a fetched record below the highest offset it has delivered, and
        records fetched before the seek keep raising that mark, so only a seek after the last of them
        is sure to bring the missing record."""
        tp = (topic, partition)
        if partition not in self.ownership.held:
            return
        target, consumer = TP(topic, partition), self.consumer_of()
        if self.positions.rewinding.get(tp) != offset:  # a new hole: is it still on the broker?
            self.positions.rewinding[tp] = offset
            earliest = (await consumer.earliest_offsets(target)).get(target, offset)
            if earliest > offset:
                self.positions.skip_to(topic, partition, earliest)
                offset = earliest
            self.stats.rewinds += 1
            log.warning("%s[%d]: records from offset %d were skipped by the consumer; reading them again",
                        topic, partition, offset)
        await consumer.seek_wait({target: offset})  # in the consumer's own thread: its fetcher is not thread-safe

    async def rewind_held(self, partitions: set[int]) -> None:
        """After an assignment: each input partition is read again from the offset after the last one
        applied, wherever the group's committed offset says (it may have run ahead of the state)."""
        targets = {TP(topic, partition): offset
                   for topic, partition, offset in self.positions.stored(list(self.by_name), partitions)
                   if partition in self.ownership.held}
        if targets:
            await self.consumer_of().seek_wait(targets)

    async def take(self, work: dict[str, ScopeWork], sends: Sends, event, item: Input) -> None:
        msg = event.message
        scope_work = work.get(item.scope)
        if scope_work is None:
            if item.kind in ACTS_ON_STATE and not self.store.exists(item.scope):
                # Nothing to act on (a request answered after its user was forgotten): applying it would
                # create the scope again, empty.
                log.info("%s for %s ignored: the scope has no state", item.kind, item.scope)
                return
            scope_work = work[item.scope] = ScopeWork(self.store.live(item.scope), msg.partition)
        state = scope_work.live.state
        position = f"{item.name}:{msg.partition}"
        if msg.offset <= state.applied.get(position, -1):
            self.stats.redelivered += 1
            return
        ident = duplicate_id(event, item.topic, item.record)
        if ident is not None and not self.marks.first_time(item.name, item.scope, ident, f"{position}:{msg.offset}",
                                                           item.at or state.clock, received_at(msg)):
            self.stats.turns_duplicate += item.topic == TOPICS.turns
            self.stats.redelivered += item.topic not in (TOPICS.turns, TOPICS.feedback)  # a forward made again
            return
        applied = Applied(item.kind, item.record, event_now(state, item.at) or datetime.now(UTC),
                          self.powerful(tenant_of(item.scope)), position, msg.offset,
                          item.topic == TOPICS.turns)
        await stepped(self.step(work, sends, event, item, applied), work, event, item)

    async def step(self, work: dict[str, ScopeWork], sends: Sends, event, item: Input, applied: Applied) -> None:
        """Apply one record to its scope's work (and an in-process backend's answers); a record the step
        refuses is dead-lettered and the scope rebuilt without it."""
        msg, scope_work = event.message, work[item.scope]
        try:
            if is_idle_tick(scope_work, applied, self.context):  # it runs the step: a refused tick is dead-lettered
                return
            apply_within(scope_work, applied, self.context, self.settings.kafka.max_record_bytes)
        except Exception as exc:  # noqa: BLE001
            # A record the domain refuses (or a bug) must not stop the partition: the scope keeps the
            # state it had before this record, and the record goes whole to the DLQ with the reason. A
            # result that cannot be applied also releases its request, or the scope would wait forever.
            log.exception("step failed for %s on %s", item.scope, msg.topic)
            self.dlq.reject(sends, event, f"could not apply to scope {item.scope}: {type(exc).__name__}: {exc}")
            scope_work = work[item.scope] = rebuild(self.store, item.scope, scope_work, self.context)
            request_id = item.record.request_id if item.kind in ANSWERS else ""
            if item.kind in ANSWERS and request_id in scope_work.live.state.requests:
                apply(scope_work, Applied(RELEASE, {"request_id": request_id}, applied.now, applied.powerful,
                                          applied.position, msg.offset, False), self.context)
            return
        if self.runner is not None and self.runner.inline:
            work[item.scope] = await self.answer_inline(sends, work[item.scope], item.scope, applied)

    async def answer_inline(self, sends: Sends, scope_work: ScopeWork, scope: str, asked: Applied) -> ScopeWork:
        """An in-process backend's answers, applied right after the record that asked (and the requests
        those answers raise, in order), at that record's position: where an answer lands is fixed by the
        partition's order alone, so a re-run of the batch, a replay after a kill or a rebuild after a
        failed step applies it at the same place. An evidence request holds its scope, so answering it at
        once changes no outcome, only the wait. A promotion does not hold it: through the result topics its
        answer would land wherever the scope had got to meanwhile (its later records no longer wait for
        anything), so replays could differ; answered here it is never late, and a denial after it on the
        partition applies to what it decided."""
        for _ in range(MAX_INLINE_ANSWERS):
            state = scope_work.live.state
            req = next((r for r in scope_work.requests if r.id in state.requests), None)
            if req is None:
                break
            record = decode_control(encode_record(await self.runner.answer(scope, req)))
            answer = Applied(record["type"], record, event_now(state, None) or asked.now, asked.powerful,
                             asked.position, asked.offset, False)
            try:
                apply_within(scope_work, answer, self.context, self.settings.kafka.max_record_bytes)
            except Exception as exc:  # noqa: BLE001 - as for a result read from the log: DLQ, release
                log.exception("step failed for %s on an in-process %s answer", scope, req.task)
                self.dlq.add(sends, self.settings.topic(TOPICS.control), scope_work.partition, asked.offset,
                             scope.encode(), encode_record(record),
                             f"could not apply to scope {scope}: {type(exc).__name__}: {exc}")
                scope_work = rebuild(self.store, scope, scope_work, self.context)
                apply(scope_work, Applied(RELEASE, {"request_id": req.id}, answer.now, answer.powerful,
                                          asked.position, asked.offset, False), self.context)
        return scope_work

    def powerful(self, tenant: str) -> bool:
        enabled = self._powerful.get(tenant)
        if enabled is None:
            enabled = self._powerful[tenant] = self.switch.enabled(tenant)
        return enabled

    async def commit(self, work: dict[str, ScopeWork], sends: Sends, last: dict) -> None:
        """Hand every record the batch sends and each changed key to the writes, made durable together
        (writes.py: in each partition's transaction, or the records acknowledged before the state)."""
        try:
            for item in sends.items:
                topic, key, value = self.dlq.bounded(*item[:3])
                self.writes.emit(item[3], getattr(self.topics, topic.attribute), key, value)
            for topic, key, value, partition, origin, trace in sends.forwards:
                self.writes.forward(getattr(self.topics, topic.attribute), key, value, partition, header(origin) | trace)
            for scope, scope_work in work.items():
                key = scope.encode()
                for e in scope_work.emits:
                    emit(self.writes, scope_work.partition, getattr(self.topics, e.topic.attribute), key,
                         encode_record(e.record), e, scope_work.traced.get(id(e)))
            turns = 0
            for partition, event in last.items():
                set_current_event(event)  # each key's changelog partition is its scope's
                self.marks.write(partition)
                self.positions.write(partition)
                self.forgets.write(partition, self.positions.expected)
                for scope, scope_work in work.items():
                    if scope_work.partition == partition:
                        turns += self.save(scope, scope_work)
            await self.writes.flush()  # the state is durable before the offsets can be committed
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

    def save(self, scope: str, scope_work: ScopeWork) -> int:
        """Write what the batch changed of the scope; the turns it applied."""
        if not scope_work.applied and not scope_work.live.unsaved:
            self.store.release(scope)  # nothing applied (redelivered, duplicate or idle): nothing to write
            return 0
        journal = scope_work.journal
        self.store.write(scope, scope_work.changed, journal)
        state = scope_work.live.state
        self.ownership.mark(scope, state.idle)
        self.stats.journal_events += len(journal)
        self.stats.archived += sum(1 for e in scope_work.emits if e.topic == TOPICS.archive)
        turns = sum(1 for a in scope_work.applied if a.turn)
        self.stats.count_step(scope, turns, scope_work.emits)
        self.stats.count_refused(scope_work.refused)
        return turns

    def forget(self, prefix: str, partition: int, after: dict[str, list[int]] | None = None, offset=None) -> None:
        """Right to be forgotten: delete the user's scopes, entries and duplicate marks. Each key is
        deleted while processing its own partition's copy of the request, so the tombstone lands in the
        changelog partition that holds the key (compacted topics: the data is gone after compaction).
        `after`: the input topics' end offsets when it was sent; what was queued before them is dropped
        when read later (forgets.py). `offset`: the forget's own, which names the user's next incarnation."""
        doomed = self.store.forget(prefix, partition, offset)
        marks = self.marks.forget(prefix, partition)
        if after is not None:
            self.forgets.hold(prefix, partition, {name: ends for name, ends in after.items() if TOPICS.get(name) in INPUTS})
            self.forgets.write(partition, self.positions.expected)
        for scope in doomed:
            self.ownership.busy.discard(scope)
        self.stats.forgotten_scopes += len(doomed)
        log.info("forgot %s on partition %d: %d scopes, %d duplicate marks", prefix, partition,
                 len(doomed), marks)
