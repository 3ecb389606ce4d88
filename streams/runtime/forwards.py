"""Input records forwarded to their scope's partition, and how a forwarded copy is known again.

A record that arrived on a partition other than its scope's (a producer whose partitioner is not
murmur2: librdkafka's default is CRC32), or under another key, is sent through the same topic to its
scope's partition, under the scope's key, and applied there only. The copy carries a header naming the
record it was made from (`topic:partition:offset`, the logical topic), so a forward repeated after a
crash (the copy was acknowledged, the batch's positions were not written) is absorbed where it lands: a
turn or feedback by its id's duplicate mark, any other record (usage, facts, control: they carry no id of
their own, and a usage hit applied again on a later day, a failure counted twice or a second flush would
change the scope) by a duplicate mark of that origin. A forget judges a copy by its origin too
(forgets.py).
"""

from __future__ import annotations

from credence.records.feedback import FeedbackRecord
from credence.records.inputs import InputRecord
from credence.records.topics import TOPICS, TopicSpec
from credence.records.turn import TurnRecord

FORWARDED_FROM = "credence-forwarded-from"
Origin = tuple[str, int, int]  # (logical topic, partition, offset)


def forwarded_from(event) -> Origin | None:
    """The record a forwarded copy was made from; None for a record as its producer sent it (or a header
    this worker did not write: it names nothing)."""
    raw = (getattr(event, "headers", None) or {}).get(FORWARDED_FROM)
    try:
        name, partition, offset = raw.decode().rsplit(":", 2)
        return name, int(partition), int(offset)
    except (AttributeError, UnicodeDecodeError, ValueError):
        return None


def origin_of(event, name: str) -> Origin:
    """The record's own place (`name` its logical topic), or that of the record a forwarded copy was made from."""
    return forwarded_from(event) or (name, event.message.partition, event.message.offset)


def header(origin: Origin) -> dict[str, bytes]:
    return {FORWARDED_FROM: ":".join(map(str, origin)).encode()}


def duplicate_id(event, topic: TopicSpec, record: InputRecord) -> str | None:
    """What makes a record the same one again in its scope: a turn's or feedback's own id; for a forwarded
    copy of any other record, the record it was made from; None: nothing (applied as it comes)."""
    if topic == TOPICS.turns and isinstance(record, TurnRecord):
        return record.turn_id
    if topic == TOPICS.feedback and isinstance(record, FeedbackRecord):
        return record.feedback_id
    origin = forwarded_from(event)
    return "from " + ":".join(map(str, origin)) if origin else None
