"""The ingest agent: decode turn records, key them by scope, drop duplicate turn_ids, dead-letter the bad."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from credence.errors import RecordError
from credence.streams.records import Turn, dead_letter, decode_turn

log = logging.getLogger(__name__)

SEP = "\x1f"  # unit separator: cannot appear in a validated scope part or turn id boundary


def register(credence) -> None:
    app, topics, tables, stats = credence.app, credence.topics, credence.tables, credence.stats
    counts, seen = tables["turn_counts"], tables["seen_turns"]

    async def reject(event, reason: str) -> None:
        msg = event.message
        stats.turns_rejected += 1
        log.warning("turn rejected (%s[%d]@%d): %s", msg.topic, msg.partition, msg.offset, reason)
        await topics.dlq.send(
            key=event.key,
            value=dead_letter(topic=msg.topic, partition=msg.partition, offset=msg.offset,
                              reason=reason, original=event.value, at=datetime.now(timezone.utc)),
        )

    async def accept(turn: Turn) -> None:
        dedupe = f"{turn.scope}{SEP}{turn.turn_id}"
        if seen[dedupe]:
            stats.turns_duplicate += 1
            return
        seen[dedupe] = 1
        counts[turn.scope] += 1
        stats.turns_accepted += 1

    @app.agent(topics.turns, name="ingest")
    async def ingest(stream):
        async for event in stream.events():
            try:
                turn = decode_turn(event.value)
            except RecordError as exc:
                await reject(event, str(exc))
                continue
            key = turn.scope.encode()
            if event.key != key:
                # Re-key through the same topic so the turn lands on its scope's partition; the copy is
                # counted there, and the turn_id dedupe absorbs a forward repeated after a crash.
                await topics.turns.send(key=key, value=event.value)
                stats.turns_rekeyed += 1
                continue
            await accept(turn)
