"""How the worker keeps scope state: batches, the live-scope cache, entry history and duplicate marks."""

from pydantic import BaseModel, ConfigDict, Field


class StateSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # A batch: up to this many input records, or what arrived within this many seconds. Each changed key
    # is written once per batch, so bigger batches write less; a batch is also the latency floor.
    batch_max_records: int = Field(default=500, ge=1)
    # 10 ms measured best (long scopes 2x of 50 ms: a scope waiting on an LLM result waits for two batches per
    # round trip; 2 ms makes batches too small for the short input's throughput and changelog bytes).
    batch_within_seconds: float = Field(default=0.01, gt=0)
    # Live scope objects kept decoded in memory (least recently used dropped first; a dropped scope is
    # read back from the tables on its next record).
    live_scopes_max: int = Field(default=2_000, ge=1)
    # Journal events kept per entry for its signal history (oldest dropped).
    history_max: int = Field(default=200, ge=1)
    # Duplicate marks (turn_id / feedback_id per scope) are kept while their record's event time, capped at its
    # Kafka timestamp, is within this horizon of the newest such time on the partition; older marks are deleted.
    seen_horizon_days: float = Field(default=7.0, gt=0)
    # Restore newly held partitions' tables by reading their changelogs in bulk (streams/state/restore.py);
    # off, Faust's own recovery reads them record by record (~30x slower, measured).
    bulk_restore: bool = True
    # Write each partition's changelog records in Kafka transactions on a producer of its own, which the
    # partition's next owner fences before restoring it (streams/state/fence.py): a worker that lost its
    # partitions but still reaches the brokers cannot write into state restored elsewhere. A batch waits
    # for its partitions' transactions (AddPartitionsToTxn, the produce, EndTxn; its emits are in them)
    # instead of the two acknowledged sends after the emits: ~70 ms against ~37 ms per batch
    # at the median on a loaded 2-core host, 0.76x (short scopes) and 0.98x (long) of the turns/s with it
    # off (throughput benchmark at half size, 10 interleaved pairs each, very noisy). Off, nothing stops
    # such a zombie's writes: only for brokers without transactions.
    transactions: bool = True
    # The changelog writers' `transaction.timeout.ms`: the coordinator aborts (and so fences) a transaction
    # open longer. A batch's transaction waits for its records' acknowledgements, so the writers' delivery
    # timeout is this less 60 s for the commit: a broker outage shorter than that is waited out. Kafka's
    # default `transaction.max.timeout.ms` (900,000) caps it; raising it needs the brokers' raised too.
    transaction_timeout_s: float = Field(default=900.0, ge=120.0)
    # A revoked partition's RocksDB stores are kept open this long (streams/state/rocks.py): one assigned back
    # within it (a member restarting, or dropped and back) is handed back as it is, not opened again in the
    # restore; then they are closed (a close flushes: 60-150 ms) in the background, one per loop turn, never
    # while a rebalance is under way. Until then a worker holds one open store per table for every partition
    # it held meanwhile (256 partitions x 5 tables: 1,280 stores, their file handles and block caches).
    revoked_store_keep_seconds: float = Field(default=300.0, ge=0)
    # Tombstones (deleted keys) are kept this long in the table changelogs (their delete.retention.ms, set
    # when they are created; changing it does not alter existing changelogs, so never raise it above
    # theirs). A worker's local store that was last in step with its changelog longer ago than half of it
    # may have missed deletions that compaction has since removed, so it is discarded and restored
    # (streams/state/freshness.py).
    changelog_tombstone_seconds: float = Field(default=86_400.0, gt=0)
