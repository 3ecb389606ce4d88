"""Operator actions on memory against the cluster: usage records, restores, consensus, and the bridge's
nominations.

Writes go through topics keyed by scope, so the scope's owner applies them in order (restores, usage);
a nomination reads the entry's history from the journal (streams/runtime/journal.py) and emits one
candidate record to credence.fact-candidates. Nothing here decides anything: the rules are in
tables/usage.py and tables/bridge.py.
"""

from __future__ import annotations

import json
from datetime import datetime

from aiokafka import AIOKafkaProducer

from credence.config import Settings
from credence.kafka import client_options
from credence.records.control import consensus_record, dedupe_record, restore_record
from credence.records.topics import TOPICS, TopicSpec
from credence.records.usage import usage_record
from credence.streams.ops.admin import ensure_topics
from credence.tables.scope import Scope


def _body(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


async def _send(bootstrap: str, settings: Settings, topic: TopicSpec, scope: str, record: dict) -> None:
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic(topic), _body(record), key=scope.encode())
    finally:
        await producer.stop()


async def send_usage(bootstrap: str, settings: Settings, scope: Scope, entry_ids: list[str], source: str,
                     at: datetime) -> None:
    await _send(bootstrap, settings, TOPICS.usage, scope.key, usage_record(scope.key, entry_ids, source, at))


async def send_restore(bootstrap: str, settings: Settings, scope: Scope, entry_id: str, by: str,
                       at: datetime) -> None:
    """Ask the scope's owner to restore a soft-archived entry (a control record, applied in order)."""
    await _send(bootstrap, settings, TOPICS.control, scope.key, restore_record(scope.key, entry_id, by, at))


async def send_consensus(bootstrap: str, settings: Settings, scope: Scope, entry_id: str, score: float, by: str,
                         at: datetime) -> None:
    """Ask the scope's owner to set an entry's external consensus (a control record, applied in order)."""
    await _send(bootstrap, settings, TOPICS.control, scope.key, consensus_record(scope.key, entry_id, score, by, at))


async def send_dedupe(bootstrap: str, settings: Settings, scope: Scope, by: str, at: datetime) -> None:
    """Ask the scope's owner to merge its near-duplicate live entries (a control record, applied in order)."""
    await _send(bootstrap, settings, TOPICS.control, scope.key, dedupe_record(scope.key, by, at))


async def send_candidate(bootstrap: str, settings: Settings, candidate: dict) -> None:
    scope = Scope(candidate["tenant"], candidate["user"], candidate["character"])
    await _send(bootstrap, settings, TOPICS.fact_candidates, scope.key, candidate)
