"""Zombie fencing: only the current owner of an input partition can write its changelogs.

A worker that lost its group session but still reaches the brokers (a long GC or CPU stall, SIGSTOP, a
partition from the group coordinator only) goes on with the batch it held after the partition was assigned
to another worker and restored there; its writes would land after the new owner's restore and mix two
histories in the compacted changelogs (newer positions beside an older control value skip inputs; a
replayed redo record reverts the other's writes). Kafka's transactions close this, as Kafka Streams'
exactly-once v1 does: one transactional producer per held input partition, `transactional.id`
`<app_id>-scopes-<partition>`, and every changelog record of partition p (the batch's redo record and table
writes, the redo replay after a restore) sent in one transaction on p's producer and committed. The batch's
emits (journal, archive, dead letters) stay on the app's producer: they are at-least-once already, and a
zombie's are the repeats a crash leaves (the same ids: downstream keeps the first). Each partition's
transaction is begun and its records sent while the emits are in flight, and committed only once every
emit is acknowledged: a batch then waits for the transaction's round trips beside the emits' instead of
after them, and its state still never records as done an emit that could be lost.

Safety argument. Assumptions: the brokers implement transactions (Kafka >= 0.11, `transaction.state.log`
replicated as configured); every changelog partition p of every table is written only through
`Fence.send(p, ...)`; whoever restores p calls `Fence.hold` (below) before it measures the changelogs'
ends, and reads them `read_committed` (our bulk reader, and Faust's consumer: transport.py).
1. `hold` starts p's producer, whose start is InitProducerId for the partition's transactional id. The
   transaction coordinator answers it only once the previous holder's transaction is settled: an open one
   is aborted (or, if its commit was already decided, completed) and its markers written, and the epoch is
   bumped. From then on the broker refuses every produce, AddPartitionsToTxn and EndTxn of an older epoch
   (ProducerFenced / InvalidProducerEpoch).
2. So every record of a zombie in p's changelogs is either in a transaction committed before step 1
   returned — below the last stable offset the new owner measures next, hence in what it restores, so its
   history includes it — or in one aborted by step 1 or refused afterwards, which read_committed readers
   never see. Nothing a zombie writes after the new owner's `hold` can be read by anyone.
3. A batch's writes of p are one transaction, so a restore sees all of them or none (the redo record keeps
   doing that job when transactions are off). The transaction is committed only after the batch's emits
   are acknowledged (until then its records are sent but read by no one), and the input offsets only
   after the commit.
4. A fenced producer raises FencedError; the agent halts without writing anything else (agent.halt), so the
   zombie's in-memory state, ahead of nothing anyone reads, is dropped with the process.
Limits: the zombie's emits of the refused batch are published (as a crash's are: the same ids); a changelog
write outside `TableWrites` would bypass the fence; a zombie that gets its partition back without having
seen it revoked keeps its fenced producer and halts at its next batch (safe, one restart), while a worker
that saw it revoked starts its writer anew in `hold` (`moved`). Its local store takes a batch's writes only
after the commit, so the refused batch never reaches it.

Transaction markers occupy offsets: the last offset of a changelog partition is a marker no reader is
given, which the restore accounts for (restore.py).
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
from credence.kafka import DELIVERY_TIMEOUT_S, client_options, release, start

log = logging.getLogger(__name__)

_FENCED = (ProducerFenced, InvalidProducerEpoch, TransactionCoordinatorFenced)
# After a commit the coordinator refuses the next transaction's AddPartitionsToTxn (CONCURRENT_TRANSACTIONS)
# until it has written the commit's markers, a few ms; aiokafka asks again after 20 ms (as Java's client
# does), which a batch right behind its predecessor waits in full. Only transactional producers use it, and
# in a worker those are the fence's.
CONCURRENT_RETRY_S = 0.005
Record = tuple[str, bytes | None, bytes | None]  # (topic, key, value); value None is a tombstone


class Fence:
    """The transactional producers of the input partitions this worker holds."""

    def __init__(self, settings: Settings, bootstrap: str) -> None:
        self._settings, self._bootstrap = settings, bootstrap
        aiokafka_sender.BACKOFF_OVERRIDE = CONCURRENT_RETRY_S  # read at each retry (aiokafka pinned < 0.15)
        self._producers: dict[int, AIOKafkaProducer] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self._stale: set[int] = set()  # moved since their writer started: another holder may have fenced it

    def transactional_id(self, partition: int) -> str:
        return f"{self._settings.app_id}-scopes-{partition}"

    async def hold(self, partitions: Iterable[int]) -> None:
        """Own exactly `partitions`: close the producers of the others, start (and so fence every earlier
        holder of) the new ones. Called by the restore before it reads anything of them."""
        wanted = set(partitions)
        for partition in sorted((set(self._producers) - wanted) | (self._stale & set(self._producers))):
            await self._close(partition)
        self._stale.clear()
        new = sorted(wanted - set(self._producers))
        started = await asyncio.gather(*(self._start(p) for p in new), return_exceptions=True)
        failed = None
        for partition, producer in zip(new, started):
            if isinstance(producer, BaseException):
                failed = failed or producer
                continue
            self._producers[partition], self._locks[partition] = producer, asyncio.Lock()
        if failed is not None:
            raise failed
        if new:
            log.info("changelog writers of partitions %s started (earlier holders fenced)", new)

    def moved(self, partitions: set[int]) -> None:
        """`partitions` were revoked or newly assigned: a worker that held them meanwhile fenced this
        one's writers of them, so `hold` starts those anew (a kept one would refuse every transaction)."""
        self._stale |= partitions

    async def send(self, partition: int, records: list[Record], before_commit: Awaitable | None = None) -> list:
        """Write `records` (all on `partition`) in one committed transaction; their metadata, in order.
        The transaction is begun and its records sent at once, and committed only once `before_commit` (the
        batch's emits being acknowledged) is done: the two round trips a transaction adds before its commit
        (AddPartitionsToTxn, the produce) overlap the emits' instead of following them. Raises FencedError
        when another worker has taken the partition over since this one's `hold`."""
        producer = self._producers.get(partition)
        if producer is None:
            raise FencedError(f"partition {partition} is not held by this worker: its changelog writes are "
                              "refused (fenced); the worker must stop")
        async with self._locks[partition]:
            try:
                await producer.begin_transaction()
                futures = [await producer.send(topic, value, key=key, partition=partition)
                           for topic, key, value in records]
                release(producer)
                metas = [await fut for fut in futures]
                if before_commit is not None:
                    await before_commit
                await producer.commit_transaction()
            except _FENCED as exc:
                raise FencedError(f"partition {partition} was taken over by another worker: this worker's "
                                  f"changelog writes are fenced ({type(exc).__name__}); it must stop") from None
        return metas

    async def stop(self) -> None:
        for partition in sorted(self._producers):
            await self._close(partition)

    async def _start(self, partition: int) -> AIOKafkaProducer:
        kafka = self._settings.kafka
        extra = {"compression_type": kafka.compression_type} if kafka.compression_type != "none" else {}
        producer = AIOKafkaProducer(**client_options(
            self._bootstrap, kafka, acks="all", transactional_id=self.transactional_id(partition),
            linger_ms=5, max_batch_size=512 * 1024, request_timeout_ms=int(DELIVERY_TIMEOUT_S * 1000), **extra))
        await start(producer, self._bootstrap, kafka)  # InitProducerId: the fencing itself (step 1)
        return producer

    async def _close(self, partition: int) -> None:
        producer = self._producers.pop(partition)
        self._locks.pop(partition, None)
        try:
            await producer.stop()
        except Exception as exc:  # noqa: BLE001 - a fenced producer may fail its last flush; it is gone anyway
            log.warning("closing the changelog writer of partition %d: %s: %s", partition, type(exc).__name__, exc)
