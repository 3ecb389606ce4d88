"""What a sink is: the contract between the consumer loop (consumer.SinkRunner) and a destination.

``write`` makes what it can of a batch durable and answers the offsets now safe to commit and the records
it rejected (dead-lettered by the runner); the runner commits exactly those, after the dead letters are
acknowledged, and nothing when ``write`` raises, so writes must be idempotent. A sink may hold records back:
``flush`` makes them visible, ``close`` durable at the end of a drain, ``resume_offset`` says where a
partition starts again, ``revoke`` forgets what it held of partitions now owned elsewhere.

The contract in full: docs/design/archive.md.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from aiokafka import TopicPartition

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class Record:
    """One consumed Kafka record, as the runner hands it over."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class Batch:
    """Records of one poll, in offset order per partition, and where the consumer stands now.

    ``position`` is the consumer's next offset of an assigned partition: no record below it is
    still to come (offsets are not dense: transaction markers take some), so a sink can close what
    lies below. It may wait for a partition that has no position yet, hence a coroutine asked only
    for the partitions a sink holds open work for.
    """

    records: list[Record]
    assigned: frozenset[TopicPartition]
    position: Callable[[TopicPartition], Awaitable[int]]


@dataclass
class Written:
    """What a ``write`` or ``flush`` achieved: the offsets now safe to commit, and the records
    rejected with their reason (dead-lettered by the runner before anything is committed)."""

    durable: Offsets = field(default_factory=dict)
    rejected: list[tuple[Record, str]] = field(default_factory=list)


@dataclass
class SinkStats:
    records: int = 0  # records read (a re-read after a restart counts again)
    dead_lettered: int = 0
    committed: Offsets = field(default_factory=dict)  # the offsets committed last, per partition


@runtime_checkable
class Sink(Protocol):
    """A destination fed by the consumer loop; see the module docstring for the contract."""

    name: str  # the name it is configured by (CREDENCE_SINKS)
    topics: tuple[str, ...]
    group_id: str
    flush_interval_seconds: float  # how often the runner calls ``flush`` while running
    max_batch: int  # the most records one ``write`` is handed
    stats: SinkStats  # the runner counts records, dead letters and commits here

    async def open(self) -> None:
        """Prepare the destination before the first record (e.g. clear what a killed writer left)."""

    def resume_offset(self, tp: TopicPartition, committed: int) -> int:
        """The offset to start partition ``tp`` at, given its committed offset."""

    async def write(self, batch: Batch) -> Written:
        """Take a batch; make durable what can be; answer with the offsets now safe to commit."""

    async def flush(self) -> Written:
        """Make every record held so far visible (at stop, on an interval); commits nothing held back."""

    async def close(self, positions: Offsets) -> Written:
        """At the end of a drain: make every record held so far durable and answer what of ``positions``
        (each partition's next offset: every record below it was handed to ``write``) is safe to commit, so
        the next drain does not read and write the held records again."""

    def revoke(self, partitions: list[TopicPartition]) -> None:
        """Forget what is held of ``partitions``: their new owner re-reads from the committed offset."""
