"""Faust's recovery service around the bulk restore (streams/state/restore.py): Faust waits
`broker_request_timeout` for its whole offset-building step and ends its recovery loop for good when the
wait runs out, so the bulk read must end within it, whatever the broker does; and a worker whose recovery
loop ended anyway (a step that raised or outlived its wait) is told to stop, instead of holding
partitions whose later assignments nobody restores."""

from __future__ import annotations

import asyncio
from collections import Counter

import faust
from faust.types import TP

from credence.config import load_settings
from credence.kafka import faust_options
from credence.streams.state import restore

TIMEOUT = 1.0  # the app's broker_request_timeout: Faust's wait for each recovery step


class SlowBroker:
    """Answers the offsets request late, and never a fetch: the bulk reader's getmany and stop hang."""

    def __init__(self, answer_after: float) -> None:
        self.answer_after = answer_after

    async def earliest_offsets(self, *tps):
        await asyncio.sleep(self.answer_after)
        return {tp: 0 for tp in tps}


class HangingReader:
    def __init__(self, **_options) -> None:
        pass

    async def start(self) -> None:
        pass

    def assign(self, tps) -> None:
        pass

    def seek(self, tp, offset) -> None:
        pass

    async def getmany(self, *tps, **_options):
        await asyncio.Event().wait()

    async def position(self, tp) -> int:
        return 0

    async def stop(self) -> None:
        await asyncio.Event().wait()


def recovery_for(tmp_path, **options) -> tuple[restore.BulkRecovery, TP]:
    settings = load_settings(kafka_bootstrap="127.0.0.1:1", data_dir=tmp_path / "data",
                             kafka={"request_timeout_ms": round(TIMEOUT * 1000)})
    app = faust.App("recovery-test", **faust_options("127.0.0.1:1", settings.kafka), store="memory://",
                    autodiscover=False, datadir=str(tmp_path / "worker"))
    assert app.conf.broker_request_timeout == TIMEOUT
    recovery = restore.install_bulk_recovery(app, settings, "127.0.0.1:1", **options)
    table = app.Table("entries", partitions=1)
    tp = TP(table.changelog_topic.get_topic_name(), 0)
    recovery.tp_to_table[tp] = table
    recovery.active_highwaters[tp] = 1_000
    return recovery, tp


def test_the_bulk_read_ends_within_fausts_wait_for_the_step(tmp_path, monkeypatch):
    """The broker took most of the budget to answer Faust's own offsets request, then never answers a fetch
    nor the reader's close: the step still returns before Faust's wait runs out, the offsets left where
    they were for Faust's own loop to read from."""
    monkeypatch.setattr(restore, "AIOKafkaConsumer", HangingReader)

    async def step() -> tuple[restore.BulkRecovery, TP, Counter]:
        recovery, tp = recovery_for(tmp_path)  # on the running loop, as the worker's services are
        destination = Counter({tp: None})
        await recovery._wait(recovery._build_offsets(SlowBroker(0.45 * TIMEOUT), {tp}, destination, "active"),
                             timeout=TIMEOUT)  # exactly as Faust's recovery loop waits for it
        return recovery, tp, destination

    recovery, tp, destination = asyncio.run(step())  # Faust's wait running out raises ServiceStopped here
    assert destination[tp] == -1
    assert recovery.restored.last["left"] == 1_001  # offsets 0..1,000, all left to Faust


def run_loop(tmp_path, step=None, stop: bool = False) -> list[str]:
    """Faust's recovery loop (as its service task runs it) after an assignment, its highwaters step
    replaced by `step`, or stopped at once with `stop`; returns the reasons given to `on_dead`."""
    died: list[str] = []

    async def main() -> None:
        recovery, _ = recovery_for(tmp_path, on_dead=died.append)
        if step is not None:
            recovery._build_highwaters = step
        recovery.signal_recovery_start.set()
        loop = asyncio.ensure_future(recovery._restart_recovery.fun(recovery))
        if stop:
            await asyncio.sleep(0)
            recovery._stopped.set()
        await asyncio.wait_for(loop, 10 * TIMEOUT)

    try:
        asyncio.run(main())
    except RuntimeError as exc:  # the step's own error, re-raised by the loop after `on_dead`
        assert died, exc
    return died


def test_a_recovery_loop_ended_by_a_step_that_outlived_its_wait_stops_the_worker(tmp_path):
    async def never(*_args) -> None:
        await asyncio.Event().wait()

    died = run_loop(tmp_path, never)
    assert len(died) == 1 and "outlived" in died[0]


def test_a_recovery_loop_ended_by_an_error_stops_the_worker(tmp_path):
    async def fails(*_args) -> None:
        raise RuntimeError("persisted offset ahead of the highwater")

    died = run_loop(tmp_path, fails)
    assert len(died) == 1 and "persisted offset ahead of the highwater" in died[0]


def test_a_stopped_recovery_service_does_not_stop_the_worker(tmp_path):
    async def never(*_args) -> None:
        await asyncio.Event().wait()

    assert run_loop(tmp_path, never, stop=True) == []


def test_every_completed_recovery_rewinds_the_inputs_after_fausts_seek_ticks_or_none(tmp_path, monkeypatch):
    """Faust's recovery ends by seeking every input partition to the group's committed offset; the stored
    positions must be sought after that, at each assignment (no wall-clock tick needed), and not when a
    newer rebalance cut the recovery short."""
    calls: list[str] = []

    async def fausts_completion(self, generation_id: int = 0) -> None:
        calls.append("faust seeks to the committed offsets")

    async def rewind() -> None:
        calls.append("rewind to the stored positions")

    monkeypatch.setattr(restore.Recovery, "on_recovery_completed", fausts_completion)

    async def complete(generation: int) -> None:
        recovery, _ = recovery_for(tmp_path, on_ready=rewind)
        recovery.app.consumer_generation_id = 3
        await recovery.on_recovery_completed(generation)

    asyncio.run(complete(3))
    assert calls == ["faust seeks to the committed offsets", "rewind to the stored positions"]
    asyncio.run(complete(2))  # a newer rebalance came meanwhile: its own recovery rewinds
    assert calls[2:] == ["faust seeks to the committed offsets"]


def test_a_rewind_that_fails_never_ends_fausts_recovery_loop(tmp_path, monkeypatch, caplog):
    async def fausts_completion(self, generation_id: int = 0) -> None:
        pass

    async def moved_under_the_seek() -> None:
        raise RuntimeError("partition is not assigned")

    monkeypatch.setattr(restore.Recovery, "on_recovery_completed", fausts_completion)

    async def complete() -> None:
        recovery, _ = recovery_for(tmp_path, on_ready=moved_under_the_seek)
        await recovery.on_recovery_completed(recovery.app.consumer_generation_id)

    asyncio.run(complete())  # returns: Faust's loop goes on to the next rebalance
    assert "could not be rewound" in caplog.text


def test_the_writers_are_told_the_input_partitions_never_fausts_leader_topic(tmp_path, monkeypatch):
    """Faust gives its leader topic's one partition to one member at random. Counted as input partition 0,
    it made that member start a changelog writer for partition 0, fencing the member that held it (which
    halted: "Can't send messages while not in transaction")."""
    told: list[tuple[set[int], int]] = []

    async def fausts_rebalance(self, *_args, **_kwargs) -> None:
        pass

    monkeypatch.setattr(restore.Recovery, "on_rebalance", fausts_rebalance)

    async def rebalance() -> None:
        recovery, _ = recovery_for(tmp_path, on_assignment=lambda partitions, generation: told.append(
            (partitions, generation)))
        recovery.app.consumer_generation_id = 5
        assigned = {TP("p.turns", 3), TP("p.control", 3), TP("p.turns", 1),
                    TP(f"{recovery.app.conf.id}-__assignor-__leader", 0)}
        await recovery.on_rebalance(assigned, set(), assigned, 5)

    asyncio.run(rebalance())
    assert told == [({1, 3}, 5)]
