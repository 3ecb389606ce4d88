"""Turn records for the integration tests: a deterministic mix of valid, duplicate, mis-keyed and
invalid records, and the little Kafka I/O the tests need (produce, read a whole topic).

Every invalid record is unique byte-for-byte and knows the reason the worker must give for it, so a
test can match each dead letter to the record that caused it.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from credence.config.kafka import KafkaSettings
from credence.kafka import client_options
from credence.tables.scope import scope_key

TENANTS = ("acme", "globex", "initech")
USERS = ("alice", "bob", "carol", "dan")
CHARACTERS = ("barista", "tutor")
START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Outgoing:
    """One record to produce: its key (None = no key) and value (None = a null value)."""

    key: bytes | None
    value: bytes | None
    scope: str | None = None  # set for valid records
    turn_id: str | None = None
    kind: str | None = None  # set for invalid records: which defect it carries
    rekeyed: bool = False  # valid, but produced with a wrong key or none
    partition: int | None = None  # None: the producer's partitioner chooses (murmur2 of the key)


@dataclass
class Batch:
    records: list[Outgoing] = field(default_factory=list)

    @property
    def valid(self) -> list[Outgoing]:
        return [r for r in self.records if r.kind is None]

    @property
    def invalid(self) -> list[Outgoing]:
        return [r for r in self.records if r.kind is not None]

    def distinct_per_scope(self, already: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
        seen: dict[str, set[str]] = defaultdict(set, {k: set(v) for k, v in (already or {}).items()})
        for r in self.valid:
            seen[r.scope].add(r.turn_id)
        return dict(seen)


def all_scopes() -> list[str]:
    return [scope_key(t, u, c) for t in TENANTS for u in USERS for c in CHARACTERS]


def turn(tenant: str, user: str, character: str, turn_id: str, i: int, /, **overrides) -> dict:
    record = {"v": 1, "tenant": tenant, "user": user, "character": character, "turn_id": turn_id,
              "role": "user" if i % 2 == 0 else "ai", "text": f"message {i} from {user} to {character}",
              "ts": (START + timedelta(minutes=i)).isoformat().replace("+00:00", "Z")}
    if i % 7 == 0:
        record["surfaced_ids"] = [f"entry-{i % 5}"]
    record.update(overrides)
    return record


def _encode(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


# kind -> (maker of the invalid record for index i, pattern the dead letter's reason must match)
def _invalid_kinds() -> dict[str, tuple]:
    def base(i: int, **kw) -> dict:
        return turn("acme", "alice", "barista", f"bad-{i}", i, **kw)

    def without(i: int, name: str) -> bytes:
        obj = base(i)
        del obj[name]
        return _encode(obj)

    return {
        "bad_json": (lambda i: b'{"v":1,"tenant":"acme","turn_id":"bad-%d"' % i, r"not valid JSON"),
        "not_utf8": (lambda i: b'\xff\xfe{"turn_id":"bad-%d"}' % i, r"not valid JSON"),
        "not_object": (lambda i: _encode(["acme", "alice", i]), r"must be a JSON object"),
        "bare_string": (lambda i: _encode(f"turn {i}"), r"must be a JSON object"),
        "missing_tenant": (lambda i: without(i, "tenant"), r"'tenant' must be a non-empty string"),
        "missing_turn_id": (lambda i: without(i, "turn_id"), r"'turn_id' must be a non-empty string"),
        "slash_user": (lambda i: _encode(base(i, user=f"ali/ce{i}")), r"'user' .*without '/'"),
        "edge_space_character": (lambda i: _encode(base(i, character=" barista")), r"'character' .*edge spaces"),
        "long_tenant": (lambda i: _encode(base(i, tenant="t" * 201)), r"'tenant' must be at most 200"),
        "empty_text": (lambda i: _encode(base(i, text="")), r"'text' must be a non-empty string"),
        "blank_text": (lambda i: _encode(base(i, text=" \n\t")), r"'text' must be a non-empty string"),
        "long_text": (lambda i: _encode(base(i, text="x" * 32_001)), r"'text' is longer than 32000"),
        "bad_role": (lambda i: _encode(base(i, role="narrator")), r"'role' must be one of"),
        "naive_ts": (lambda i: _encode(base(i, ts="2026-09-01T09:00:00")), r"'ts' needs a UTC offset"),
        "unparseable_ts": (lambda i: _encode(base(i, ts="next tuesday")), r"'ts' is not ISO-8601"),
        "numeric_ts": (lambda i: _encode(base(i, ts=1_788_000_000 + i)), r"'ts' must be an ISO-8601 string"),
        "version_2": (lambda i: _encode(base(i, v=2)), r"unsupported record version 2"),
        "surfaced_not_list": (lambda i: _encode(base(i, surfaced_ids="entry-1")), r"'surfaced_ids' must be a list"),
        "surfaced_empty_id": (lambda i: _encode(base(i, surfaced_ids=["entry-1", ""])),
                              r"'surfaced_ids' must be a list"),
    }


INVALID_KINDS = _invalid_kinds()
NULL_VALUE = "null_value"
REASON_PATTERNS = {kind: pattern for kind, (_, pattern) in INVALID_KINDS.items()} | {NULL_VALUE: r"null value"}


def reason_matches(kind: str, reason: str) -> bool:
    return bool(reason) and re.search(REASON_PATTERNS[kind], reason) is not None


def generate(total: int = 1000, invalid: int = 50, seed: int = 42, id_space: int = 60,
             scopes: list[str] | None = None, prefix: str = "turn") -> Batch:
    """`total` records, `invalid` of them invalid (every kind, one null value), the rest valid.

    Turn ids are drawn from a small per-scope space (`prefix-0..id_space`), so exact duplicates within
    a scope happen naturally, and the same turn id occurs in many scopes (where each one counts).
    About a tenth of the valid records carry a wrong key and a tenth none: the ingest agent re-keys them.
    """
    rng = random.Random(seed)
    scopes = scopes or all_scopes()
    records: list[Outgoing] = []
    for i in range(total - invalid):
        scope = rng.choice(scopes)
        tenant, user, character = scope.split("/")
        turn_id = f"{prefix}-{rng.randrange(id_space)}"
        roll = rng.random()
        if roll < 0.1:
            key, rekeyed = rng.choice([s for s in scopes if s != scope]).encode(), True
        elif roll < 0.2:
            key, rekeyed = None, True
        else:
            key, rekeyed = scope.encode(), False
        # Same turn id, different text: still the same turn (dedupe is by scope + turn_id).
        value = _encode(turn(tenant, user, character, turn_id, i))
        records.append(Outgoing(key=key, value=value, scope=scope, turn_id=turn_id, rekeyed=rekeyed))
    kinds = list(INVALID_KINDS)
    bad = [Outgoing(key=b"acme/alice/barista", value=None, kind=NULL_VALUE)]
    for j in range(invalid - 1):
        kind = kinds[j % len(kinds)]
        value = INVALID_KINDS[kind][0](seed * 10_000 + j)
        key = rng.choice([b"acme/alice/barista", None, b"nonsense"])
        bad.append(Outgoing(key=key, value=value, kind=kind))
    for record in bad:  # spread the invalid records through the stream
        records.insert(rng.randrange(len(records) + 1), record)
    return Batch(records)


async def produce(bootstrap: str, topic: str, records: list[Outgoing],
                  kafka: KafkaSettings | None = None) -> list[tuple[int, int]]:
    """Produce in order, acks=all; return (partition, offset) of each record."""
    producer = AIOKafkaProducer(**client_options(bootstrap, kafka, acks="all", linger_ms=5,
                                                 max_request_size=2_000_000))
    await producer.start()
    try:
        futures = [await producer.send(topic, r.value, key=r.key, partition=r.partition) for r in records]
        return [((meta := await f).partition, meta.offset) for f in futures]
    finally:
        await producer.stop()


async def read_topic(bootstrap: str, topic: str, partitions: int, kafka: KafkaSettings | None = None) -> list:
    """Every committed record currently in `topic` (its `partitions`, from the beginning to the last stable
    offsets, taken once no transaction is open: a worker's commit is acknowledged before its markers are
    written, and the last stable offset stops before its records until they are)."""
    consumer = AIOKafkaConsumer(**client_options(bootstrap, kafka, enable_auto_commit=False,
                                                 auto_offset_reset="earliest", isolation_level="read_committed"))
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        for _ in range(200):  # at most ~10 s
            ends, high = await consumer.end_offsets(parts), await end_offsets(bootstrap, topic, partitions, kafka)
            if all(ends[tp] >= high[tp.partition] for tp in parts):
                break
            await asyncio.sleep(0.05)  # until the markers are written
        out = []
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            batches = await consumer.getmany(*parts, timeout_ms=1000)
            for tp_records in batches.values():
                out.extend(r for r in tp_records if r.offset < ends[TopicPartition(r.topic, r.partition)])
        return out
    finally:
        await consumer.stop()


async def uncommitted(bootstrap: str, group: str, topic: str, partitions: int,
                      kafka: KafkaSettings | None = None) -> int:
    """Records of `topic` that consumer group `group` has not committed yet."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**client_options(bootstrap, kafka))
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(group)
    finally:
        await admin.close()
    ends = await end_offsets(bootstrap, topic, partitions, kafka)
    return sum(end - max(getattr(committed.get(TopicPartition(topic, p)), "offset", 0), 0) for p, end in ends.items())


async def end_offsets(bootstrap: str, topic: str, partitions: int, kafka: KafkaSettings | None = None) -> dict[int, int]:
    """{partition: the offset the next record of `topic` will get}."""
    consumer = AIOKafkaConsumer(**client_options(bootstrap, kafka, enable_auto_commit=False))
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: end for tp, end in ends.items()}
    finally:
        await consumer.stop()
