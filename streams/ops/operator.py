"""Seed 002 operator actions against the cluster: usage records, restores, consensus, and the bridge's
nominations.

Writes go through topics keyed by scope, so the scope's owner applies them in order (restores, usage);
a nomination reads the entry's history from the journal (credence.evidence, kept forever) and emits one
candidate record to credence.fact-candidates. Nothing here decides anything: the rules are in
tables/usage.py and tables/bridge.py.
"""

from __future__ import annotations

import json
from datetime import datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from credence.config import Settings
from credence.kafka import client_options
from credence.errors import CredenceError
from credence.streams.ops.admin import ensure_topics
from credence.streams.runtime.records import consensus_record, dedupe_record, restore_record, usage_record
from credence.tables.bridge import nominate
from credence.tables.entries import Entry
from credence.tables.scope import Scope


def _body(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


async def _send(bootstrap: str, settings: Settings, name: str, scope: str, record: dict) -> None:
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic(name), _body(record), key=scope.encode())
    finally:
        await producer.stop()


async def send_usage(bootstrap: str, settings: Settings, scope: Scope, entry_ids: list[str], source: str,
                     at: datetime) -> None:
    await _send(bootstrap, settings, "usage", scope.key, usage_record(scope.key, entry_ids, source, at))


async def send_restore(bootstrap: str, settings: Settings, scope: Scope, entry_id: str, by: str,
                       at: datetime) -> None:
    """Ask the scope's owner to restore a soft-archived entry (a control record, applied in order)."""
    await _send(bootstrap, settings, "control", scope.key, restore_record(scope.key, entry_id, by, at))


async def send_consensus(bootstrap: str, settings: Settings, scope: Scope, entry_id: str, score: float, by: str,
                         at: datetime) -> None:
    """Ask the scope's owner to set an entry's external consensus (a control record, applied in order)."""
    await _send(bootstrap, settings, "control", scope.key, consensus_record(scope.key, entry_id, score, by, at))


async def send_dedupe(bootstrap: str, settings: Settings, scope: Scope, by: str, at: datetime) -> None:
    """Ask the scope's owner to merge its near-duplicate live entries (a control record, applied in order)."""
    await _send(bootstrap, settings, "control", scope.key, dedupe_record(scope.key, by, at))


def entries_from_journal(events: list[dict]) -> list[Entry]:
    """The newest snapshot of every entry the events name (facts events skipped): the scope as stored."""
    latest: dict[str, Entry] = {}
    for e in events:
        if e.get("entry_kind") in ("reflection", "persona"):
            snap = Entry.from_dict(e["entry"])
            if snap.id not in latest or snap.version > latest[snap.id].version:
                latest[snap.id] = snap
    return list(latest.values())


async def journal_of(bootstrap: str, settings: Settings, entry_id: str | None, scope: Scope | None = None) -> list[dict]:
    """Every journal event of ``entry_id`` (of ``scope``, when given: then only its partition is read);
    with no ``entry_id``, every event of ``scope``."""
    topic = settings.topic("evidence")
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, enable_auto_commit=False,
                                                 auto_offset_reset="earliest"))
    await consumer.start()
    try:
        everyone = list(range(settings.topic_partitions))  # the worker refuses topics with another count
        wanted = [DefaultPartitioner()(scope.key.encode(), everyone, everyone)] if scope else everyone
        parts = [TopicPartition(topic, p) for p in wanted]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        events = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for records in (await consumer.getmany(*parts, timeout_ms=1000)).values():
                for r in records:
                    if r.offset >= ends[TopicPartition(r.topic, r.partition)] or not r.value:
                        continue
                    event = json.loads(r.value)
                    if (entry_id is None or event.get("entry_id") == entry_id) and (
                            scope is None or (event.get("tenant"), event.get("user"), event.get("character"))
                            == (scope.tenant, scope.user, scope.character)):
                        events.append(event)
        return events
    finally:
        await consumer.stop()


def scope_of(events: list[dict], entry_id: str) -> Scope:
    """The one scope whose journal names ``entry_id``; a CredenceError says what to pass otherwise."""
    scopes = sorted({(e["tenant"], e["user"], e["character"]) for e in events})
    if not scopes:
        raise CredenceError(f"no journal events for entry {entry_id!r}: check the id (and --scope)")
    if len(scopes) > 1:
        raise CredenceError(f"entry id {entry_id!r} exists in {len(scopes)} scopes; pass --scope tenant/user/character")
    return Scope(*scopes[0])


def candidate_from_journal(events: list[dict], entry_id: str, now: datetime, by: str, settings: Settings) -> dict:
    """The candidate record of ``entry_id`` from its journal events (tables.bridge.nominate decides)."""
    scope_of(events, entry_id)
    versions = {}
    for e in events:
        snap = Entry.from_dict(e["entry"])
        versions.setdefault(snap.version, snap)  # at-least-once journal: the first copy of a version wins
    latest = versions[max(versions)]
    signals = [{k: e.get(k) for k in ("event_id", "event", "cause", "from_status", "to_status", "at", "score", "tier")}
               for e in events]
    return nominate(latest, now, nominated_by=by, versions=versions.values(), signals=signals,
                    settings=settings.bridge)


async def send_candidate(bootstrap: str, settings: Settings, candidate: dict) -> None:
    scope = Scope(candidate["tenant"], candidate["user"], candidate["character"])
    await _send(bootstrap, settings, "fact-candidates", scope.key, candidate)
