"""The runner's contract with any sink, proved with the smallest sink there is (records kept in a list):
it commits the offsets `write` answered durable and nothing past them, dead-letters what `write`
rejected before committing, and a `write` that raises commits nothing of its batch."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from credence.errors import SinkError
from credence.kafka import client_options
from credence.sinks.base import Batch, Record, Sink, SinkStats, Written
from credence.sinks.consumer import SinkRunner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
BAD = b"not a record"


class ListSink:
    """Keeps records in memory. Durable means "kept", and only up to each multiple of 5 offsets (like the
    archive's spans it holds a tail back); ``fail_at``: the batch holding that offset raises."""

    name = "list"
    flush_interval_seconds = 3600.0
    max_batch = 7

    def __init__(self, topic: str, group_id: str, fail_at: int | None = None) -> None:
        self.topics, self.group_id, self.fail_at = (topic,), group_id, fail_at
        self.stats = SinkStats()
        self.kept: list[Record] = []
        self.answered: dict[TopicPartition, int] = {}
        self.refused: list[Record] = []

    async def open(self) -> None:
        pass

    def resume_offset(self, tp: TopicPartition, committed: int) -> int:
        return committed

    async def write(self, batch: Batch) -> Written:
        if self.fail_at is not None and any(r.offset >= self.fail_at for r in batch.records):
            self.refused = batch.records
            raise SinkError("the destination refused the batch")
        written = Written()
        for record in batch.records:
            if record.value == BAD:
                written.rejected.append((record, "not a record"))
            else:
                self.kept.append(record)
            if (record.offset + 1) % 5 == 0:
                written.durable[record.tp] = record.offset + 1
        self.answered.update(written.durable)
        return written

    async def flush(self) -> Written:
        return Written()

    async def close(self, positions) -> Written:
        return Written()  # it holds its tail even at a drain's end

    def revoke(self, partitions) -> None:
        pass


async def setup(bootstrap: str, topic: str, dlq: str, counts: dict[int, int], bad: set[int] = frozenset()) -> None:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    await admin.create_topics([NewTopic(topic, num_partitions=len(counts), replication_factor=1),
                               NewTopic(dlq, num_partitions=1, replication_factor=1)])
    await admin.close()
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        for partition, count in counts.items():
            for i in range(count):
                await producer.send(topic, BAD if i in bad else f"r{partition}-{i}".encode(), partition=partition)
        await producer.flush()
    finally:
        await producer.stop()


async def committed(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        return {tp: meta.offset for tp, meta in (await admin.list_consumer_group_offsets(group)).items()}
    finally:
        await admin.close()


class WatchedRunner(SinkRunner):
    """Before each commit, reads what the dead-letter topic holds on the broker: the order of dead
    letters and commits, observed from outside the runner."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commits: list[tuple[dict[TopicPartition, int], set[tuple[int, int]]]] = []

    async def _commit(self, offsets) -> None:
        on_dlq = {(e["partition"], e["offset"]) for e in map(json.loads, await read_now(self.bootstrap,
                                                                                        self.dead_letter_topic))}
        self.commits.append((dict(offsets), on_dlq))
        await super()._commit(offsets)


async def read_now(bootstrap: str, topic: str) -> list[bytes]:
    """Every value the topic holds now (one partition), up to its end offset."""
    tp = TopicPartition(topic, 0)
    consumer = AIOKafkaConsumer(**client_options(bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"))
    await consumer.start()
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        records: list = []
        async with asyncio.timeout(30):
            while len(records) < end:
                records += (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
        return [r.value for r in records]
    finally:
        await consumer.stop()


async def read_all(bootstrap: str, topic: str, expected: int) -> list:
    consumer = AIOKafkaConsumer(topic, **client_options(bootstrap, auto_offset_reset="earliest"))
    await consumer.start()
    records = []
    try:
        async with asyncio.timeout(30):
            while len(records) < expected:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    records += messages
    finally:
        await consumer.stop()
    return records


def test_the_runner_commits_what_write_answered_durable_and_dead_letters_what_it_rejected(
        kafka_bootstrap, topic_prefix):
    topic, dlq, group = f"{topic_prefix}.list", f"{topic_prefix}.dlq", f"{topic_prefix}-list"

    async def scenario():
        await setup(kafka_bootstrap, topic, dlq, {0: 23, 1: 17}, bad={3, 11})
        sink = ListSink(topic, group)
        assert isinstance(sink, Sink)
        runner = WatchedRunner(sink, kafka_bootstrap, dead_letter_topic=dlq)
        stats = await runner.drain()
        return (sink, stats, await committed(kafka_bootstrap, group), await read_all(kafka_bootstrap, dlq, 4),
                runner.commits)

    sink, stats, offsets, dead, commits = asyncio.run(scenario())
    expected = {TopicPartition(topic, 0): 20, TopicPartition(topic, 1): 15}  # not 23 and 17: the tail is held
    assert sink.answered == expected and offsets == expected and stats.committed == expected
    assert (stats.records, len(sink.kept), stats.dead_lettered) == (40, 36, 4)
    sources = sorted((e["partition"], e["offset"], e["reason"]) for e in (json.loads(m.value) for m in dead))
    assert sources == [(0, 3, "not a record"), (0, 11, "not a record"), (1, 3, "not a record"), (1, 11, "not a record")]
    # Dead letters before the commit: when an offset past a rejected record was committed, that record's
    # dead letter was already on the topic.
    rejected = {(p, o) for p, o, _ in sources}
    covered = [(tp.partition, o) for offsets_now, _ in commits for tp, end in offsets_now.items()
               for p, o in rejected if p == tp.partition and o < end]
    assert len(covered) >= 4, commits  # every rejected record lies below some commit
    late = [(offsets_now, sorted(on_dlq)) for offsets_now, on_dlq in commits
            if {(tp.partition, o) for tp, end in offsets_now.items() for p, o in rejected
                if p == tp.partition and o < end} - on_dlq]
    assert late == [], f"committed past a rejected record before its dead letter was on the topic: {late}"


def test_a_write_that_raises_commits_nothing_of_its_batch_and_a_restart_resumes_at_the_commit(
        kafka_bootstrap, topic_prefix):
    topic, dlq, group = f"{topic_prefix}.list", f"{topic_prefix}.dlq", f"{topic_prefix}-list"
    tp = TopicPartition(topic, 0)

    async def scenario():
        await setup(kafka_bootstrap, topic, dlq, {0: 40})
        failing = ListSink(topic, group, fail_at=22)
        with pytest.raises(SinkError, match="refused the batch"):
            await SinkRunner(failing, kafka_bootstrap).drain()
        after_failure = await committed(kafka_bootstrap, group)
        healthy = ListSink(topic, group)
        await SinkRunner(healthy, kafka_bootstrap).drain()
        return failing, after_failure, healthy, await committed(kafka_bootstrap, group)

    failing, after_failure, healthy, final = asyncio.run(scenario())
    # Batches of at most 7 records: the refused one started at or below the last commit's end.
    assert failing.kept and failing.refused
    assert after_failure == failing.answered and after_failure[tp] <= failing.refused[0].offset
    assert healthy.kept[0].offset == after_failure[tp]  # re-read from the last commit, nothing skipped
    assert final == {tp: 40}
