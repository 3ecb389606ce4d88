"""The credence.dlq envelope, shared by the worker and the sinks: enough to find, understand and re-send
the original record."""

from __future__ import annotations

import base64
import json
from datetime import datetime

from credence.errors import RecordError
from credence.records.envelope import decode
from credence.tables.clock import format_instant

# The envelope must fit in one Kafka record (1 MiB by default) after base64 (+33%): a bigger original
# keeps its first bytes, says so, and stays findable by (topic, partition, offset).
MAX_ORIGINAL_BYTES = 256_000


def dead_letter(*, topic: str, partition: int, offset: int, reason: str, original: bytes | None,
                at: datetime) -> bytes:
    original = original or b""
    envelope = {
        "v": 1, "topic": topic, "partition": partition, "offset": offset, "reason": reason[:2000],
        "original": base64.b64encode(original[:MAX_ORIGINAL_BYTES]).decode(),
        "at": format_instant(at),
    }
    if len(original) > MAX_ORIGINAL_BYTES:
        envelope |= {"original_bytes": len(original), "original_truncated": True}
    return json.dumps(envelope).encode()


def read_dead_letter(raw: bytes | None) -> tuple[dict, bytes]:
    """A credence.dlq record: the checked envelope and the original bytes it carries (their first
    MAX_ORIGINAL_BYTES when ``original_truncated``)."""
    envelope = decode(raw, "dead letter")
    try:
        original = base64.b64decode(envelope["original"], validate=True)
    except ValueError:
        raise RecordError("'original' must be base64") from None
    return envelope, original
