"""The evidence journal through the real broker into Parquet, then the funnel through DuckDB."""

from __future__ import annotations

import asyncio
import json
from datetime import date

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from credence.config.archive import ArchiveSettings
from credence.kafka import client_options
from credence.sinks.analytics import FunnelRow, connect, funnel
from credence.sinks.consumer import drain
from credence.sinks.schema import EVIDENCE

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# Per entry: its lifecycle as (day, event, to_status). Entries i = 0..59 of tenants t0/t1, by i % 4:
#   0: created d1, confirmed d1, promoted d2          1: created d1, denied d2, archived d3
#   2: created d1, merged d2                          3: created d2 only (signals do not count)
LIFECYCLES = {
    0: [(1, "created", "pending"), (1, "transition", "confirmed"), (2, "transition", "promoted")],
    1: [(1, "created", "pending"), (2, "transition", "denied"), (3, "archived", "archived")],
    2: [(1, "created", "pending"), (2, "merged", "merged")],
    3: [(2, "created", "pending"), (2, "signal", None), (3, "signal", None)],
}


def journal() -> list[dict]:
    events = []
    for i in range(60):
        for version, (day, event, to_status) in enumerate(LIFECYCLES[i % 4], start=1):
            at = f"2026-05-0{day}T{(i % 24):02d}:00:00Z"
            entry = {"id": f"e{i}", "kind": "reflection", "tenant": f"t{i % 2}", "user": "u", "character": "c",
                     "text": "x", "status": to_status or "pending", "version": version, "updated_at": at}
            events.append({"v": 1, "event_id": f"e{i}@{version}", "tenant": f"t{i % 2}", "user": "u",
                           "character": "c", "entry_id": f"e{i}", "entry_kind": "reflection", "event": event,
                           "cause": "user_confirm", "from_status": None, "to_status": to_status, "at": at,
                           "score": 1.0, "tier": None, "entry": entry})
    return events


def expected_funnel() -> list[FunnelRow]:
    # 60 entries, 30 per tenant; per tenant 30 // 4 or so of each lifecycle, counted from LIFECYCLES.
    counts: dict[tuple[str, int], dict[str, int]] = {}
    stage_of = {"created": "created", "merged": "merged", "archived": "archived"}
    status_stage = {"confirmed": "confirmed", "promoted": "promoted", "denied": "denied"}
    for i in range(60):
        for day, event, to_status in LIFECYCLES[i % 4]:
            c = counts.setdefault((f"t{i % 2}", day), dict.fromkeys(
                ("created", "confirmed", "promoted", "merged", "denied", "archived"), 0))
            if event in stage_of:
                c[stage_of[event]] += 1
            if to_status in status_stage:
                c[status_stage[to_status]] += 1
    return [FunnelRow(t, date(2026, 5, d), **c) for (t, d), c in sorted(counts.items())]


def test_funnel_over_the_sunk_journal_is_exact(kafka_bootstrap, topic_prefix, tmp_path):
    topic = f"{topic_prefix}.evidence"
    settings = ArchiveSettings(root=str(tmp_path / "archive"), max_rows_per_shard=10)

    async def scenario():
        admin = AIOKafkaAdminClient(**client_options(kafka_bootstrap))
        await admin.start()
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        await admin.close()
        producer = AIOKafkaProducer(**client_options(kafka_bootstrap, acks="all"))
        await producer.start()
        for event in journal():
            await producer.send(topic, json.dumps(event).encode(),
                                key=f"{event['tenant']}/{event['user']}/{event['character']}".encode())
        await producer.stop()
        return await drain(kafka_bootstrap, topic, EVIDENCE, settings)

    stats = asyncio.run(scenario())
    assert stats.rows == len(journal())
    # Hand check of one cell: t0 holds even i; i % 4 == 0 -> 15 entries confirmed on day 1.
    expected = expected_funnel()
    assert FunnelRow("t0", date(2026, 5, 1), 30, 15, 0, 0, 0, 0) in expected
    assert funnel(connect(settings.root)) == expected


def test_redelivered_and_resynced_events_are_counted_once(kafka_bootstrap, topic_prefix, tmp_path):
    """A crashed worker re-sends journal events (same event_id, later offsets) and resync snapshots
    (event "resync", same event_id, a later `at`, possibly another day): the funnel is unchanged."""
    topic = f"{topic_prefix}.evidence"
    settings = ArchiveSettings(root=str(tmp_path / "archive"), max_rows_per_shard=10)
    events = journal()
    redelivered = [dict(e) for e in events[5:40:3]]
    resynced = [dict(e, event="resync", at=e["at"].replace("2026-05-0", "2026-05-1")) for e in events[::7]]
    stream = events[:80] + redelivered + events[80:] + resynced

    async def scenario():
        admin = AIOKafkaAdminClient(**client_options(kafka_bootstrap))
        await admin.start()
        await admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        await admin.close()
        producer = AIOKafkaProducer(**client_options(kafka_bootstrap, acks="all"))
        await producer.start()
        for event in stream:
            await producer.send(topic, json.dumps(event).encode(),
                                key=f"{event['tenant']}/{event['user']}/{event['character']}".encode())
        await producer.stop()
        return await drain(kafka_bootstrap, topic, EVIDENCE, settings)

    stats = asyncio.run(scenario())
    assert (stats.rows, stats.duplicates_dropped) == (len(stream), len(redelivered) + len(resynced))
    assert funnel(connect(settings.root)) == expected_funnel()
    ids = connect(settings.root).execute("SELECT event_id, count(*) FROM evidence GROUP BY ALL").fetchall()
    assert len(ids) == len(events) and {n for _, n in ids} == {1}
