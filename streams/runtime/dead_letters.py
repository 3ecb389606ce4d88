"""What the scope agent refuses goes whole to the DLQ with the reason, sent with its batch: an input the
step or the decoder refuses, an in-process answer that cannot be applied, and a record the batch would send
that the broker would refuse for its size (its dead letter holds the original cut to what fits), and a
misplaced input whose forwarded copy would be over the record limit."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from credence.config import Settings
from credence.records.dead_letter import dead_letter
from credence.records.topics import TOPICS, TopicSpec
from credence.streams.runtime.batch import Sends
from credence.streams.runtime.forwards import header

log = logging.getLogger(__name__)


class DeadLetters:
    def __init__(self, settings: Settings, stats) -> None:
        self.settings, self.stats = settings, stats  # stats: the worker's counters (app.Stats)

    def bounded(self, topic: TopicSpec, key: bytes | None, value: bytes) -> tuple[TopicSpec, bytes | None, bytes]:
        """A record the batch sends beside the scopes' effects, or its dead letter (the original cut to
        what the envelope holds) when the broker would refuse it."""
        size = len(key or b"") + len(value)
        if size <= self.settings.kafka.max_record_bytes:
            return topic, key, value
        reason = f"a {size}-byte record, over the record limit (CREDENCE_KAFKA__MAX_RECORD_BYTES)"
        log.warning("record for %s not sent: %s", topic, reason)
        self.stats.records_rejected += 1
        return TOPICS.dlq, key, dead_letter(topic=self.settings.topic(topic), partition=-1, offset=-1, reason=reason,
                                       original=value, at=datetime.now(UTC))

    def forward(self, sends: Sends, event, topic: TopicSpec, key: bytes, home: int, origin: tuple,
                trace: dict | None) -> bool:
        """Send an input record on to its scope's partition (forwards.py), or refuse it whole when its copy,
        with the headers naming where it came from, would be over the record limit: the broker took the
        original, the producer would refuse the copy, and the partition would halt on every restart."""
        headers = header(origin) | (trace or {})
        size = len(key) + len(event.value or b"") + sum(len(k) + len(v) for k, v in headers.items())
        if size > self.settings.kafka.max_record_bytes:
            self.reject(sends, event, f"a {size}-byte record with its forwarding headers, over the record "
                                      "limit (CREDENCE_KAFKA__MAX_RECORD_BYTES): not forwarded to its scope's partition")
            return False
        sends.forward(topic, key, event.value, home, origin, trace)
        return True

    def reject(self, sends: Sends, event, reason: str) -> None:
        """An input record (a Faust event) refused whole."""
        msg = event.message
        self.add(sends, msg.topic, msg.partition, msg.offset, event.key, event.value, reason)

    def add(self, sends: Sends, topic: str, partition: int, offset: int, key: bytes | None,
            original: bytes | None, reason: str) -> None:
        """A record refused whole, with the reason, on the DLQ (sent with the batch)."""
        self.stats.turns_rejected += topic == self.settings.topic(TOPICS.turns)
        self.stats.records_rejected += 1
        log.warning("record rejected (%s[%d]@%d): %s", topic, partition, offset, reason)
        sends.add(TOPICS.dlq, key, dead_letter(topic=topic, partition=partition, offset=offset, reason=reason,
                                          original=original, at=datetime.now(UTC)), partition)
