"""The credence.dlq envelope, shared by the worker and the sinks: enough to find, understand and re-send
the original record."""

from __future__ import annotations

import base64
import json
from datetime import datetime

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
