"""The redo record of a batch: every table write of the batch on one partition, in one record of the
`seen` changelog, made durable before any of those writes is sent.

Key `redo␟partition␟part`, split in parts below Kafka's record limit; each part carries the batch's id
and its count of parts, so leftovers of an older batch and a batch whose parts did not all arrive are
ignored. Whoever restores the partition applies it again before any input is read. Why: docs/state.md.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Final

import orjson

from credence.errors import StateError
from credence.streams.state import codec

KIND: Final = "redo"
PART_BYTES: Final = 512 * 1024  # raw writes per part; compressed, a part stays far below Kafka's 1 MiB record
_HEAD = struct.Struct(">HII")  # table name length, key length, value length (TOMBSTONE: deleted)
TOMBSTONE: Final = 0xFFFFFFFF


@dataclass(frozen=True)
class Write:
    table: str  # the table's name (StateTables field)
    key: str
    value: bytes | None  # None deletes the key


def redo_key(partition: int, part: int) -> str:
    return f"{KIND}{codec.SEP}{partition}{codec.SEP}{part}"


def is_redo_key(key: str) -> bool:
    return key.startswith(KIND + codec.SEP)


def encode(writes: list[Write]) -> list[bytes]:
    """The parts of one batch's redo record (at least one, even for no writes)."""
    batch = uuid.uuid4().hex
    bodies: list[list[bytes]] = [[]]
    size = 0
    for w in writes:
        name, key = w.table.encode(), w.key.encode()
        value = w.value if w.value is not None else b""
        framed = _HEAD.pack(len(name), len(key), TOMBSTONE if w.value is None else len(value)) + name + key + value
        if size and size + len(framed) > PART_BYTES:
            bodies.append([])
            size = 0
        bodies[-1].append(framed)
        size += len(framed)
    return [orjson.dumps({"v": 1, "batch": batch, "part": i, "parts": len(bodies)}) + b"\n"
            + zlib.compress(b"".join(body), 1) for i, body in enumerate(bodies)]


@dataclass(frozen=True)
class Part:
    batch: str
    part: int
    parts: int
    body: bytes  # compressed framed writes


def decode_part(raw: bytes) -> Part:
    try:
        head, body = raw.split(b"\n", 1)
        meta = orjson.loads(head)
        if meta.get("v") != 1:
            raise StateError(f"stored redo record has schema {meta.get('v')!r}; this worker reads 1")
        return Part(str(meta["batch"]), int(meta["part"]), int(meta["parts"]), body)
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"stored redo record is malformed: {exc}") from None


def decode_writes(parts: list[Part]) -> list[Write]:
    out: list[Write] = []
    for part in parts:
        try:
            body = zlib.decompress(part.body)
        except zlib.error as exc:
            raise StateError(f"stored redo record does not decompress: {exc}") from None
        at = 0
        while at < len(body):
            if at + _HEAD.size > len(body):
                raise StateError("stored redo record is truncated")
            n_name, n_key, n_value = _HEAD.unpack_from(body, at)
            at += _HEAD.size
            name, key = body[at:at + n_name].decode(), body[at + n_name:at + n_name + n_key].decode()
            at += n_name + n_key
            value = None
            if n_value != TOMBSTONE:
                value, at = body[at:at + n_value], at + n_value
            if at > len(body):
                raise StateError("stored redo record is truncated")
            out.append(Write(name, key, value))
    return out


def complete(read) -> tuple[list[bytes], list[Write]] | None:
    """The raw parts and the writes of the last batch whose redo is whole, read with `read(part)` (the
    stored bytes or None); None if there is none (never written, or a batch that stopped before its
    writes were sent)."""
    first = read(0)
    if first is None:
        return None
    head = decode_part(first)
    raws, parts = [first], [head]
    for i in range(1, head.parts):
        raw = read(i)
        part = decode_part(raw) if raw is not None else None
        if part is None or part.batch != head.batch:
            return None
        raws.append(raw)
        parts.append(part)
    return raws, decode_writes(parts)
