"""The journal (credence.evidence, kept forever) read back from outside the worker: every event of an entry
or a scope, the newest snapshot of each entry, and the bridge's candidate built from an entry's history.
The operator's commands and the API's nominations share it (as-of reads use the scope's kept versions,
streams/state/versions.py).

A forget never touches the journal: a forgotten user's events stay, and a returning user's entries come
back under the same deterministic ids with version lines begun again. Every fold here keeps one
incarnation of the scope (records.journal.INCARNATION): the one the caller names (the scope's owner knows
its state's), else the newest the scope's events show."""

from __future__ import annotations

import json
from datetime import datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from credence.config import Settings
from credence.errors import BridgeError, CredenceError
from credence.kafka import client_options
from credence.records.envelope import decode
from credence.records.journal import EVENT_FIELDS, event_id, incarnation_of
from credence.records.topics import TOPICS
from credence.streams.scope.erase import ERASED
from credence.streams.state.codec import decode_control
from credence.tables.bridge import nominate
from credence.tables.entries import Entry
from credence.tables.scope import Scope


def one_incarnation(events: list[dict], incarnation: int | None = None) -> list[dict]:
    """The events of one incarnation of each scope they name: ``incarnation``, or each scope's newest."""
    def scope(e: dict) -> tuple:
        return e.get("tenant"), e.get("user"), e.get("character")

    newest: dict[tuple, int] = {}
    for e in events:
        newest[scope(e)] = max(newest.get(scope(e), 0), incarnation_of(e))
    return [e for e in events
            if incarnation_of(e) == (newest[scope(e)] if incarnation is None else incarnation)]


def entries_from_journal(events: list[dict], incarnation: int | None = None) -> list[Entry]:
    """The newest snapshot of every entry the events name (facts events skipped): the scope as stored, in
    one incarnation (``one_incarnation``)."""
    latest: dict[str, Entry] = {}
    erased: dict[str, int] = {}  # entry id -> the version the user deleted it at
    for e in one_incarnation(events, incarnation):
        if e.get("entry_kind") in ("reflection", "persona"):
            snap = Entry.from_dict(e["entry"])
            if e.get("event") == ERASED:
                erased[snap.id] = max(erased.get(snap.id, 0), snap.version)
            elif snap.id not in latest or snap.version > latest[snap.id].version:
                latest[snap.id] = snap
    return [s for s in latest.values() if s.version > erased.get(s.id, 0)]


async def journal_of(bootstrap: str, settings: Settings, entry_id: str | None, scope: Scope | None = None) -> list[dict]:
    """Every journal event of ``entry_id`` (of ``scope``, when given: then only its partition is read);
    with no ``entry_id``, every event of ``scope``."""
    topic = settings.topic(TOPICS.evidence)
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
        events, key = [], scope.key.encode() if scope else None
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for records in (await consumer.getmany(*parts, timeout_ms=1000)).values():
                for r in records:
                    if r.offset >= ends[TopicPartition(r.topic, r.partition)] or not r.value:
                        continue
                    if key is not None and r.key != key:
                        continue  # another scope's event (the journal is keyed by scope): never decoded
                    event = decode(r.value, TOPICS.evidence.record)
                    if (entry_id is None or event.get("entry_id") == entry_id) and (
                            scope is None or (event.get("tenant"), event.get("user"), event.get("character"))
                            == (scope.tenant, scope.user, scope.character)):
                        events.append(event)
        return events
    finally:
        await consumer.stop()


async def scope_incarnation(bootstrap: str, settings: Settings, scope: Scope) -> int | None:
    """The scope's incarnation as its owner stored it, from the `scopes` table's changelog (its partition,
    read_committed: a fenced owner's writes never count); None when the scope has no state (never written
    to, or its user forgotten). For the commands that fold the journal outside the worker: without it,
    the newest life the journal shows is a forgotten one when the user has not come back."""
    return (await scope_incarnations(bootstrap, settings, [scope]))[scope]


async def scope_incarnations(bootstrap: str, settings: Settings, scopes: list[Scope]) -> dict[Scope, int | None]:
    """``scope_incarnation`` of many scopes, each changelog partition they live on read once."""
    topic = f"{settings.app_id}-scopes-changelog"  # Faust's naming (ops.admin.changelog_topic)
    everyone = list(range(settings.topic_partitions))
    by_key = {key: scope for scope in scopes for key in changelog_keys(scope)}
    parts = sorted({TopicPartition(topic, DefaultPartitioner()(s.key.encode(), everyone, everyone)) for s in scopes})
    values: dict[Scope, bytes | None] = {}
    if not parts:
        return {}
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka, enable_auto_commit=False,
                                                 auto_offset_reset="earliest", isolation_level="read_committed"))
    await consumer.start()
    try:
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        while [tp for tp in parts if await consumer.position(tp) < ends[tp]]:
            for tp, records in (await consumer.getmany(*parts, timeout_ms=1000)).items():
                for r in records:
                    if r.offset < ends[tp] and r.key in by_key:
                        values[by_key[r.key]] = r.value  # the latest wins; a tombstone (None): forgotten
    finally:
        await consumer.stop()
    controls = {scope: decode_control(values.get(scope)) for scope in scopes}
    return {scope: None if c is None else c.state.incarnation for scope, c in controls.items()}


def changelog_keys(scope: Scope) -> set[bytes]:
    """The keys a scope's value may have on the `scopes` changelog: Faust's JSON of the key, which writes a
    non-ASCII scope as raw UTF-8 (not as \\u escapes), and the bare key."""
    return {json.dumps(scope.key, ensure_ascii=False).encode(), json.dumps(scope.key).encode(), scope.key.encode()}


def scope_of(events: list[dict], entry_id: str) -> Scope:
    """The one scope whose journal names ``entry_id``; a CredenceError says what to pass otherwise."""
    scopes = sorted({(e["tenant"], e["user"], e["character"]) for e in events})
    if not scopes:
        raise CredenceError(f"no journal events for entry {entry_id!r}: check the id (and --scope)")
    if len(scopes) > 1:
        raise CredenceError(f"entry id {entry_id!r} exists in {len(scopes)} scopes; pass --scope tenant/user/character")
    return Scope(*scopes[0])


def candidate_from_journal(events: list[dict], entry_id: str, now: datetime, by: str, settings: Settings,
                           incarnation: int | None = None) -> dict:
    """The candidate record of ``entry_id`` from its journal events, of one incarnation of its scope
    (tables.bridge.nominate decides); the candidate id names the incarnation as event ids do."""
    scope_of(events, entry_id)
    events = one_incarnation(events, incarnation)
    if not events:
        raise BridgeError(f"no journal events for entry {entry_id!r} since its user was last forgotten")
    versions = {}
    for e in events:
        snap = Entry.from_dict(e["entry"])
        versions.setdefault(snap.version, snap)  # at-least-once journal: the first copy of a version wins
    latest = versions[max(versions)]
    signals = [{k: e.get(k) for k in EVENT_FIELDS} for e in events]
    candidate = nominate(latest, now, nominated_by=by, versions=versions.values(), signals=signals,
                         settings=settings.bridge)
    return candidate | {"candidate_id": event_id(latest.id, latest.version, incarnation_of(events[0]))}
