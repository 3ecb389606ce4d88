"""credence.dlq v1: a record refused whole, with the reason, shared by the worker and the sinks: enough to
find, understand and re-send the original record."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime

from credence.errors import RecordError
from credence.records.envelope import DEAD_LETTER, decode
from credence.tables.clock import format_instant

VERSION = 1
# The envelope must fit in one Kafka record (1 MiB by default) after base64 (+33%): a bigger original
# keeps its first bytes, says so, and stays findable by (topic, partition, offset).
MAX_ORIGINAL_BYTES = 256_000


@dataclass(frozen=True)
class DeadLetter:
    """Where the refused record was (its full topic, or what it was, e.g. ``request:<task>``), why, and its
    original bytes."""

    topic: str
    partition: int
    offset: int
    reason: str
    original: bytes
    at: datetime

    def encode(self) -> bytes:
        envelope = {
            "v": VERSION, "topic": self.topic, "partition": self.partition, "offset": self.offset,
            "reason": self.reason[:2000], "original": base64.b64encode(self.original[:MAX_ORIGINAL_BYTES]).decode(),
            "at": format_instant(self.at),
        }
        if len(self.original) > MAX_ORIGINAL_BYTES:
            envelope |= {"original_bytes": len(self.original), "original_truncated": True}
        return json.dumps(envelope).encode()


def dead_letter(*, topic: str, partition: int, offset: int, reason: str, original: bytes | None,
                at: datetime) -> bytes:
    return DeadLetter(topic, partition, offset, reason, original or b"", at).encode()


def read_dead_letter(raw: bytes | None) -> tuple[dict, bytes]:
    """A credence.dlq record: the checked envelope and the original bytes it carries (their first
    MAX_ORIGINAL_BYTES when ``original_truncated``)."""
    envelope = decode(raw, DEAD_LETTER)
    try:
        original = base64.b64decode(envelope["original"], validate=True)
    except ValueError:
        raise RecordError("'original' must be base64") from None
    return envelope, original
