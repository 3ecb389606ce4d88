"""The credence.dlq envelope, shared by the worker and the sinks: enough to find, understand and re-send
the original record."""

from __future__ import annotations

import base64
import json
from datetime import datetime

from credence.tables.clock import format_instant


def dead_letter(*, topic: str, partition: int, offset: int, reason: str, original: bytes | None,
                at: datetime) -> bytes:
    return json.dumps({
        "v": 1, "topic": topic, "partition": partition, "offset": offset, "reason": reason,
        "original": base64.b64encode(original or b"").decode(),
        "at": format_instant(at),
    }).encode()
