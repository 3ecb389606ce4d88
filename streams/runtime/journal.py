"""The journal (credence.evidence, kept forever) read back from outside the worker: every event of an entry
or a scope, the newest snapshot of each entry, and the bridge's candidate built from an entry's history.
The operator's commands and the API's as-of reads and nominations share it."""

from __future__ import annotations

from datetime import datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from credence.config import Settings
from credence.envelope import decode
from credence.errors import CredenceError
from credence.journal_records import EVENT_FIELDS
from credence.kafka import client_options
from credence.tables.bridge import nominate
from credence.tables.entries import Entry
from credence.tables.scope import Scope


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
                                                 auto_offset_reset="earliest", isolation_level="read_committed"))
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
                    event = decode(r.value, "evidence")
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
    signals = [{k: e.get(k) for k in EVENT_FIELDS} for e in events]
    return nominate(latest, now, nominated_by=by, versions=versions.values(), signals=signals,
                    settings=settings.bridge)
