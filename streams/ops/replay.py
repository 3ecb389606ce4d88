"""Replaying a JSON-lines file of turn records into credence.turns."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aiokafka import AIOKafkaProducer

from credence.config import Settings
from credence.errors import CredenceError
from credence.kafka import client_options, start
from credence.streams.ops.admin import ensure_topics
from credence.streams.runtime.records import scope_key


def key_of(line: bytes) -> bytes | None:
    """The scope key if the record names one; a record that does not is still sent, so the worker can
    dead-letter it with its reason instead of the replayer silently dropping it."""
    try:
        obj = json.loads(line)
        return scope_key(obj["tenant"], obj["user"], obj["character"]).encode()
    except (ValueError, KeyError, TypeError):
        return None


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


async def replay(path: Path, bootstrap: str, settings: Settings, progress: bool = True) -> int:
    """Produce every non-blank line of `path` to the turns topic, keyed by scope. Returns the count."""
    lines = read_lines(path)
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=5))
    await start(producer, bootstrap, settings.kafka)
    try:
        topic = settings.topic("turns")
        futures = []
        for i, line in enumerate(lines, 1):
            futures.append(await producer.send(topic, line, key=key_of(line)))
            if progress and (i % 50 == 0 or i == len(lines)):
                _progress(i, len(lines))
        for fut in futures:
            await fut  # every record acknowledged by the broker before we report success
    finally:
        await producer.stop()
    return len(lines)


def scopes_in(path: Path) -> list[str]:
    """The distinct scopes named by the file's records, in first-seen order."""
    keys = (key_of(line) for line in read_lines(path))
    return list(dict.fromkeys(k.decode() for k in keys if k))


async def send_control(bootstrap: str, settings: Settings, scopes: list[str], record_type: str) -> None:
    """One control record per scope (e.g. "flush": end of input, extract what the windows still hold)."""
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await start(producer, bootstrap, settings.kafka)
    try:
        for scope in scopes:
            tenant, user, character = scope.split("/")
            body = {"v": 1, "type": record_type, "tenant": tenant, "user": user, "character": character}
            await producer.send_and_wait(settings.topic("control"), json.dumps(body).encode(), key=scope.encode())
    finally:
        await producer.stop()


async def send_forget(bootstrap: str, settings: Settings, tenant: str, user: str) -> int:
    """Ask every partition's owner to delete the user's scopes: one forget record per partition (a user's
    scopes — one per character — live on many partitions). Returns the partitions asked."""
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await start(producer, bootstrap, settings.kafka)
    try:
        topic = settings.topic("control")
        body = json.dumps({"v": 1, "type": "forget", "tenant": tenant, "user": user}).encode()
        parts = sorted(producer.client.cluster.partitions_for_topic(topic) or range(settings.topic_partitions))
        for partition in parts:
            await producer.send_and_wait(topic, body, key=f"{tenant}/{user}/".encode(), partition=partition)
        return len(parts)
    finally:
        await producer.stop()
