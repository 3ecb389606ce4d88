"""Replaying a JSON-lines file of turn records into credence.turns."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from credence import tracing
from credence.config import Settings
from credence.errors import CredenceError, DomainError
from credence.kafka import client_options, start
from credence.records.control import forget_record
from credence.records.dead_letter import dead_letter
from credence.records.topics import TOPICS
from credence.streams.ops.admin import ensure_topics
from credence.streams.runtime.topics import end_offsets
from credence.tables.scope import Scope, user_prefix


def scope_of(line: bytes) -> Scope | None:
    """The scope a record names, built from its tenant/user/character fields (each checked by the one
    scope-part rule); None when the line is not a JSON object naming a valid scope."""
    try:
        obj = json.loads(line)
        return Scope(obj["tenant"], obj["user"], obj["character"])
    except (ValueError, KeyError, TypeError, RecursionError, DomainError):
        return None


# Kafka's default record limit is 1 MiB (producer max.request.size / broker message.max.bytes); a line
# bigger than this cannot go to the turns topic at all, so the replayer dead-letters it itself.
MAX_RECORD_BYTES = 1_040_000


def key_of(line: bytes) -> bytes | None:
    """The scope key if the record names a valid scope; a record that does not is still sent (unkeyed),
    so the worker can dead-letter it with its reason instead of the replayer silently dropping it."""
    scope = scope_of(line)
    return scope.key.encode() if scope is not None else None


def read_lines(path: Path) -> list[bytes]:
    if not path.exists():
        raise CredenceError(f"replay file not found: {path}")
    return [line for line in path.read_bytes().splitlines() if line.strip()]


def _progress(done: int, total: int, stream=sys.stderr) -> None:
    if not stream.isatty() and done not in (total,):
        return
    width = 30
    filled = width * done // max(total, 1)
    stream.write(f"\rreplay [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        stream.write("\n")
    stream.flush()


def _too_large(line: bytes, topic: str, line_no: int) -> bytes:
    return dead_letter(topic=topic, partition=-1, offset=-1, original=line, at=datetime.now(UTC),
                       reason=f"line {line_no}: a record of {len(line)} bytes is larger than the {MAX_RECORD_BYTES} "
                              "bytes a turn record may have")


async def replay(path: Path, bootstrap: str, settings: Settings, progress: bool = True,
                 written: dict[int, int] | None = None) -> int:
    """Produce every non-blank line of `path` to the turns topic, keyed by scope; a line too large for
    Kafka goes to the dead-letter topic with its reason instead. Returns the count sent to turns; `written`
    (when given) gets each turns partition's highest offset written: the replay's consistency token."""
    lines = read_lines(path)
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=5))
    await start(producer, bootstrap, settings.kafka)
    try:
        with tracing.span("credence.replay", tracing.PRODUCER, attributes={"credence.replay.lines": len(lines)}):
            return await _produce(producer, lines, settings, progress, written)
    finally:
        await producer.stop()


async def _produce(producer: AIOKafkaProducer, lines: list[bytes], settings: Settings, progress: bool,
                   written: dict[int, int] | None = None) -> int:
    """Send the lines (each turn with the replay's trace context, when tracing is on); returns the count
    sent to turns."""
    headers = tracing.aiokafka_headers()
    topic = settings.topic(TOPICS.turns)
    futures = []
    sent = 0
    for i, line in enumerate(lines, 1):
        if len(line) > MAX_RECORD_BYTES:
            futures.append(await producer.send(settings.topic(TOPICS.dlq), _too_large(line, topic, i)))
            continue
        sent += 1
        futures.append(await producer.send(topic, line, key=key_of(line), headers=headers))
        if progress and (i % 50 == 0 or i == len(lines)):
            _progress(i, len(lines))
    for fut in futures:
        meta = await fut  # every record acknowledged by the broker before we report success
        if written is not None and meta.topic == topic:
            written[meta.partition] = max(meta.offset, written.get(meta.partition, -1))
    if sent < len(lines):
        print(f"replay: {len(lines) - sent} line(s) too large for Kafka went to {settings.topic(TOPICS.dlq)}",
              file=sys.stderr)
    return sent


def scopes_in(path: Path) -> list[Scope]:
    """The distinct valid scopes named by the file's records, in first-seen order (a record naming an
    invalid one is the worker's to dead-letter; there is nothing of it to flush)."""
    scopes = (scope_of(line) for line in read_lines(path))
    return list(dict.fromkeys(s for s in scopes if s is not None))


async def send_control(bootstrap: str, settings: Settings, scopes: list[Scope | str], record_type: str) -> None:
    """One control record per scope (e.g. "flush": end of input, extract what the windows still hold).
    The record's parts are the scope's own fields; a key string is accepted only if it names a valid
    scope (DomainError otherwise, never a half-sent batch of one bad split)."""
    checked = [s if isinstance(s, Scope) else Scope.parse(s) for s in scopes]
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await start(producer, bootstrap, settings.kafka)
    try:
        for scope in checked:
            body = {"v": 1, "type": record_type, "tenant": scope.tenant, "user": scope.user,
                    "character": scope.character}
            await producer.send_and_wait(settings.topic(TOPICS.control), json.dumps(body).encode(),
                                         key=scope.key.encode())
    finally:
        await producer.stop()


async def flush_when_read(bootstrap: str, settings: Settings, scopes: list[Scope], timeout_s: float,
                          poll_s: float = 0.5) -> int:
    """End a historical replay: once the worker group (``settings.app_id``) has committed every turns partition
    up to its current end, one ``flush`` control record per scope. Sent sooner, a flush could be applied before
    the scope's last turns (it travels on another topic) and leave them in a window no later turn closes.
    Returns the scopes flushed; CredenceError when no worker has read the turns within ``timeout_s``."""
    partitions = list(range(settings.topic_partitions))
    ends = dict(zip(partitions, (await end_offsets(bootstrap, settings, partitions))[TOPICS.turns.name], strict=True))
    await wait_committed(bootstrap, settings, {p: end - 1 for p, end in ends.items() if end}, timeout_s, poll_s)
    await send_control(bootstrap, settings, scopes, "flush")
    return len(scopes)


async def wait_committed(bootstrap: str, settings: Settings, offsets: dict[int, int], timeout_s: float,
                         poll_s: float = 0.5) -> None:
    """Return once the worker group has committed each turns partition past `offsets` (partition -> the last
    offset to be read): a worker commits a batch's offsets only after its state is durable, so every turn
    up to them is applied (`credence replay --wait applied`). CredenceError after `timeout_s`."""
    tps = [TopicPartition(settings.topic(TOPICS.turns), p) for p in sorted(offsets)]
    if not tps:
        return
    admin = AIOKafkaAdminClient(**client_options(bootstrap, settings.kafka))
    await start(admin, bootstrap, settings.kafka)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            committed = await admin.list_consumer_group_offsets(settings.app_id, partitions=tps)
            behind = {tp.partition: (meta.offset if meta else -1, offsets[tp.partition] + 1)
                      for tp, meta in committed.items() if meta is None or meta.offset <= offsets[tp.partition]}
            if not behind:
                break
            if time.monotonic() > deadline:
                raise CredenceError(
                    f"the worker group {settings.app_id!r} has not read {settings.topic(TOPICS.turns)} that far "
                    f"within {timeout_s:.0f} s (partition: (committed, needed) {behind}); is `credence worker` "
                    "running with the same CREDENCE_APP_ID and CREDENCE_TOPIC_PREFIX?")
            await asyncio.sleep(poll_s)
    finally:
        await admin.close()


async def send_forget(bootstrap: str, settings: Settings, tenant: str, user: str) -> int:
    """Ask every partition's owner to delete the user's scopes: one forget record per partition (a user's
    scopes — one per character — live on many partitions). Returns the partitions asked."""
    return len(await send_forget_at(bootstrap, settings, tenant, user))


async def send_forget_at(bootstrap: str, settings: Settings, tenant: str, user: str) -> dict[int, int]:
    """`send_forget`, returning the offset each partition's forget record was written at: the user's scopes
    begin again there as incarnation offset + 1 (streams/state/incarnations.py), the archive's cut-off.

    The record names every input topic's end offsets at sending (`after`): the user's records queued
    before the forget on any topic are dropped when the worker reads them later, never applied
    (streams/state/forgets.py)."""
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await start(producer, bootstrap, settings.kafka)
    try:
        topic = settings.topic(TOPICS.control)
        parts = sorted(producer.client.cluster.partitions_for_topic(topic) or range(settings.topic_partitions))
        body = forget_record(tenant, user, await end_offsets(bootstrap, settings, parts))
        written = {}
        for partition in parts:
            meta = await producer.send_and_wait(topic, body, key=user_prefix(tenant, user).encode(),
                                                partition=partition)
            written[partition] = meta.offset
        return written
    finally:
        await producer.stop()


def last_turns(path: Path) -> dict[Scope, str]:
    """Each scope's last turn id in the file (a scope's turns are applied in order on its partition)."""
    last: dict[Scope, str] = {}
    for line in read_lines(path):
        scope = scope_of(line)
        turn_id = json.loads(line).get("turn_id") if scope is not None else None
        if isinstance(turn_id, str):
            last[scope] = turn_id
    return last


async def wait_extracted(url: str, key: str, last: dict[Scope, str], timeout_s: float) -> None:
    """`credence replay --wait extracted`: ask each scope's owner (through the API) until each scope's last
    turn is extracted; CredenceError naming the scopes still short after `timeout_s`."""
    from credence.client import AsyncClient

    deadline = time.monotonic() + timeout_s
    waiting = dict(last)
    clients: dict[str, AsyncClient] = {}
    try:
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CredenceError(f"{len(waiting)} scope(s) not extracted within {timeout_s:.0f} s, e.g. "
                                    f"{next(iter(waiting)).key}")
            for scope, turn_id in list(waiting.items()):
                api = clients.setdefault(scope.tenant, AsyncClient(url, key, scope.tenant, timeout=60.0))
                status = await api.turn(scope.user, scope.character, turn_id, wait="extracted",
                                        timeout=max(0.1, min(left, 10.0)))
                if status.reached:
                    del waiting[scope]
    finally:
        for api in clients.values():
            await api.aclose()


async def wait_replayed(args, bootstrap: str, settings: Settings, written: dict[int, int]) -> str:
    """`credence replay --wait`: applied, the worker group committed past every turn written (it commits a
    batch only once its state is durable); extracted, besides, the API says each scope's last turn is."""
    await wait_committed(bootstrap, settings, written, args.wait_timeout)
    if args.wait == "extracted":
        from credence.streams.ops.mcp_stdio import read_key

        if not args.key_file:
            raise CredenceError("--wait extracted asks the API: give --key-file (and --url)")
        await wait_extracted(args.url, read_key(args.key_file), last_turns(Path(args.file)), args.wait_timeout)
    return f"every turn {args.wait} (token {','.join(f'{p}:{o}' for p, o in sorted(written.items()))})"
