"""Zombie fencing and exactly-once output: only the current owner of an input partition can write its
changelogs, and what a batch sends is readable exactly when its state is.

One transactional producer per held input partition (`transactional.id` `<app_id>-scopes-<partition>`);
every changelog record of partition p (a batch's redo record and writes, the redo replay after a restore)
and every record a batch of p emits go in one transaction on p's producer. `Fence.hold` starts them before
a restore measures the changelogs' ends, which fences their earlier holders. The safety argument, the
rebalance and timeout rules and the limits: docs/state.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidProducerEpoch, ProducerFenced, TransactionCoordinatorFenced
from aiokafka.producer import sender as aiokafka_sender

from credence.config import Settings
from credence.errors import FencedError
from credence.kafka import client_options, release, start

log = logging.getLogger(__name__)

_FENCED = (ProducerFenced, InvalidProducerEpoch, TransactionCoordinatorFenced)
# After a commit the coordinator refuses the next transaction's AddPartitionsToTxn (CONCURRENT_TRANSACTIONS)
# until it has written the commit's markers, a few ms; aiokafka asks again after 20 ms (as Java's client
# does), which a batch right behind its predecessor waits in full. Only transactional producers use it, and
# in a worker those are the fence's.
CONCURRENT_RETRY_S = 0.005
# Of the transaction timeout, what is left for the commit (EndTxn and its markers) once the records are in.
COMMIT_MARGIN_S = 60.0
Record = tuple[str, bytes | None, bytes | None]  # (topic, key, value); value None is a tombstone
# (topic, key, value, partition or None for the key's default partition, headers or None)
Emit = tuple[str, bytes | None, bytes, int | None, dict[str, bytes] | None]


def producer_options(settings: Settings, transactional_id: str) -> dict:
    """The keyword arguments of a partition's transactional producer (without the connection's)."""
    kafka, timeout_s = settings.kafka, settings.state.transaction_timeout_s
    extra = {"compression_type": kafka.compression_type} if kafka.compression_type != "none" else {}
    return {"acks": "all", "transactional_id": transactional_id, "linger_ms": 5, "max_batch_size": 512 * 1024,
            # every record credence sends is checked against max_record_bytes first; the producer's own
            # limit must not refuse one that passed
            "max_request_size": max(1024 * 1024, kafka.max_record_bytes + 16 * 1024),
            "transaction_timeout_ms": int(timeout_s * 1000),
            "request_timeout_ms": int((timeout_s - COMMIT_MARGIN_S) * 1000)} | extra


class Fence:
    """The transactional producers of the input partitions this worker holds."""

    def __init__(self, settings: Settings, bootstrap: str) -> None:
        self._settings, self._bootstrap = settings, bootstrap
        aiokafka_sender.BACKOFF_OVERRIDE = CONCURRENT_RETRY_S  # read at each retry (aiokafka pinned < 0.15)
        self._producers: dict[int, AIOKafkaProducer] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._starting: dict[int, asyncio.Future] = {}  # partition -> its producer being started
        self._closing: set[asyncio.Future] = set()
        self._generation: dict[int, int] = {}  # partition -> the last group generation it was assigned in

    def transactional_id(self, partition: int) -> str:
        return f"{self._settings.app_id}-scopes-{partition}"

    def assigned(self, partitions: Iterable[int], generation: int) -> None:
        """The group's assignment of `generation`: keep the producers of partitions also held in the
        generation before, close those of partitions gone (in the background, together) and start the
        others' now (fencing their earlier holders), outside Faust's bounded restore step; `hold` waits."""
        wanted = set(partitions)
        held_through = {p for p in wanted if self._generation.get(p, -2) >= generation - 1}
        kept = held_through & set(self._producers)
        self._retire((set(self._producers) - kept) | (set(self._starting) - held_through))
        self._generation = dict.fromkeys(wanted, generation)
        for p in sorted(wanted - kept - set(self._starting)):
            self._starting[p] = asyncio.ensure_future(self._start(p))
        if wanted - kept:
            log.info("changelog writers of partitions %s starting; kept %s", sorted(wanted - kept), sorted(kept))

    async def hold(self, partitions: Iterable[int]) -> None:
        """Own exactly `partitions`: close the producers of the others, wait for (or start) the new ones,
        which fences every earlier holder. Called by the restore before it reads anything of them."""
        wanted = set(partitions)
        self._retire((set(self._producers) | set(self._starting)) - wanted)
        for p in sorted(wanted - set(self._producers) - set(self._starting)):
            self._starting[p] = asyncio.ensure_future(self._start(p))
        new = {p: self._starting[p] for p in sorted(wanted) if p in self._starting}
        started = await asyncio.gather(*new.values(), return_exceptions=True)
        failed = None
        for (partition, task), producer in zip(new.items(), started):
            if self._starting.get(partition) is not task:
                continue  # retired meanwhile (a newer assignment): its closing stops it
            del self._starting[partition]
            if isinstance(producer, BaseException):
                failed = failed or producer
                continue
            self._producers[partition], self._locks[partition] = producer, asyncio.Lock()
        if failed is not None:
            raise failed
        if new:
            log.info("changelog writers of partitions %s started (earlier holders fenced)", sorted(new))

    async def send(self, partition: int, records: list[Record], before_commit: Awaitable | None = None,
                   emits: list[Emit] = ()) -> list:
        """Write `records` (all on `partition`) and `emits` (anywhere) in one committed transaction; the
        records' metadata, in order. `before_commit` (if any) is awaited before the commit. Raises
        FencedError when another worker has taken the partition over since this one's `hold`."""
        producer = self._producers.get(partition)
        if producer is None:
            raise FencedError(f"partition {partition} is not held by this worker: its changelog writes are "
                              "refused (fenced); the worker must stop")
        async with self._locks[partition]:
            try:
                await producer.begin_transaction()
                futures = [await producer.send(topic, value, key=key, partition=partition)
                           for topic, key, value in records]
                sent = [await producer.send(topic, value, key=key, partition=to,
                                            headers=list(headers.items()) if headers else None)
                        for topic, key, value, to, headers in emits]
                release(producer)
                metas = [await fut for fut in futures]
                for fut in sent:
                    await fut
                if before_commit is not None:
                    await before_commit
                await producer.commit_transaction()
            except _FENCED as exc:
                raise FencedError(f"partition {partition} was taken over by another worker: this worker's "
                                  f"changelog writes are fenced ({type(exc).__name__}); it must stop") from None
        return metas

    async def stop(self) -> None:
        self._retire(set(self._producers) | set(self._starting))
        await asyncio.gather(*self._closing, return_exceptions=True)

    async def _start(self, partition: int) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(**client_options(self._bootstrap, self._settings.kafka, **producer_options(
            self._settings, self.transactional_id(partition))))
        await start(producer, self._bootstrap, self._settings.kafka)  # InitProducerId: the fencing itself
        return producer

    def _retire(self, partitions: set[int]) -> None:
        """Close the producers of `partitions` (and those still starting) together, in the background."""
        for partition in sorted(partitions):
            self._locks.pop(partition, None)
            producer, starting = self._producers.pop(partition, None), self._starting.pop(partition, None)
            if producer is not None or starting is not None:
                closing = asyncio.ensure_future(self._close(partition, producer, starting))
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(partition: int, producer: AIOKafkaProducer | None, starting: asyncio.Future | None) -> None:
        try:
            if starting is not None:
                producer = await starting
            await producer.stop()
        except Exception as exc:  # noqa: BLE001 - a fenced producer may fail its last flush; it is gone anyway
            log.warning("closing the changelog writer of partition %d: %s: %s", partition, type(exc).__name__, exc)


TRANSACTION_LOG = "__transaction_state"  # the brokers' internal topic of transactional ids


async def warm_transactions(settings: Settings, bootstrap: str) -> None:
    """Have the brokers create their transaction log before this worker joins its group. On a cluster that
    never ran a transaction the first InitProducerId waits while it is created: 17-20 s measured at 256
    partitions on a loaded 2-core host, awaited inside Faust's bounded (15 s) restore step, which halted
    the worker. A producer of its own id (never used for a write) pays that wait here, unbounded."""
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, **producer_options(
        settings, f"{settings.app_id}-scopes-warm")))
    await start(producer, bootstrap, settings.kafka)  # InitProducerId: returns once the log is there
    await producer.stop()
