"""Table writes of one batch: applied to the local stores at once, their changelog records sent together
and awaited by `flush`, before the batch's input offsets may be committed.

Faust's own table write queues each changelog record behind its producer buffer, which publishes them
one by one and blocks the consumer when more than 100 wait: on a busy host a batch's writes crawled at
~100 records/s and stalled intake and commits. Here the records of a batch go to the producer together
(each key on its scope's partition, encoded by the table's own serializers, so Faust's recovery reads
them as its own), and the local store learns the persisted offset as Faust's write would tell it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def local(table):
    """The table's local store (a Faust table's `data`; a plain mapping is its own store)."""
    return getattr(table, "data", table)


@dataclass
class TableWrites:
    pending: list[tuple[object, str, bytes | None, int]] = field(default_factory=list)

    def put(self, table, key: str, value: bytes, partition: int) -> None:
        local(table)[key] = value
        self.pending.append((table, key, value, partition))

    def delete(self, table, key: str, partition: int) -> None:
        try:
            del local(table)[key]
        except KeyError:
            return  # nothing stored: nothing to tombstone
        self.pending.append((table, key, None, partition))

    async def flush(self) -> int:
        """Send every pending changelog record, then wait for all acknowledgements. Returns the count."""
        pending, self.pending = self.pending, []
        sent = []
        for table, key, value, partition in pending:
            topic = getattr(table, "changelog_topic", None)
            if topic is None:
                continue  # a plain mapping (unit tests): no changelog
            sent.append((table, await topic.send(key=key, value=value, partition=partition,
                                                 key_serializer=table.key_serializer,
                                                 value_serializer=table.value_serializer)))
        newest: dict = {}
        for table, fut in sent:
            meta = await fut
            newest[(id(table), meta.topic_partition)] = (table, meta.topic_partition, meta.offset)
        for table, tp, offset in newest.values():
            local(table).set_persisted_offset(tp, offset)
        return len(sent)
