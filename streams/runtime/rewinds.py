"""Reading an input partition again: from a hole the consumer skipped (positions.py), and after an
assignment from the offset after the last one applied, wherever the group's committed offset says."""

from __future__ import annotations

import logging
from collections.abc import Callable

from faust.types import TP

from credence.streams.state.transaction import WorkerState

log = logging.getLogger(__name__)


async def rewind(consumer_of: Callable[[], object], state: WorkerState, stats, topic: str, partition: int,
                 offset: int) -> None:
    """Fetch (topic, partition) again from `offset`. Again after every batch that still brought
    records past the hole: Faust drops a fetched record below the highest offset it has delivered, and
    records fetched before the seek keep raising that mark, so only a seek after the last of them
    is sure to bring the missing record."""
    tp, positions = (topic, partition), state.positions
    if partition not in state.ownership.held:
        return
    target, consumer = TP(topic, partition), consumer_of()
    if positions.rewinding.get(tp) != offset:  # a new hole: is it still on the broker?
        positions.rewinding[tp] = offset
        earliest = (await consumer.earliest_offsets(target)).get(target, offset)
        if earliest > offset:
            positions.skip_to(topic, partition, earliest)
            offset = earliest
        stats.rewinds += 1
        log.warning("%s[%d]: records from offset %d were skipped by the consumer; reading them again",
                    topic, partition, offset)
    await consumer.seek_wait({target: offset})  # in the consumer's own thread: its fetcher is not thread-safe


async def rewind_held(consumer_of: Callable[[], object], state: WorkerState, topics: list[str],
                      partitions: set[int]) -> None:
    """After an assignment: each input partition of `topics` is read again from the offset after the last
    one applied (the group's committed offset may have run ahead of the state)."""
    targets = {TP(topic, partition): offset
               for topic, partition, offset in state.positions.stored(topics, partitions)
               if partition in state.ownership.held}
    if targets:
        await consumer_of().seek_wait(targets)
