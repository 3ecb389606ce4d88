"""Two live owners of one partition: worker A is frozen (SIGSTOP) mid-replay with a backlog until the group
drops it, worker B takes every partition over, restores it and applies the rest of the input; then A is
woken (SIGCONT) and goes on with the batch it held. A zombie like that must not write into the changelogs
B restored: A halts (its writes are refused by the broker) and a third worker restoring from the
changelogs alone ends exactly like one uninterrupted run.

Deterministic: A is frozen while it has taken in a tenth of the input, so records are in its take buffer
or in a batch it is applying, and Faust lets a stream finish the records it took before a revocation
takes effect: after the wake-up A always tries to commit at least one more batch. Unfenced, that batch
lands after B's in the changelogs (its older positions and control values last), and the third worker's
entries differ from the reference: inputs applied twice (evidence counted again), entries it never had."""

from __future__ import annotations

import asyncio
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

from credence.streams.ops.broker import free_port
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.faults.conversations import conversations
from tests.faults.harness import (
    READY_S,
    deadline_for,
    end_state_differences,
    fresh_settings,
    reference_run,
    taken_in,
    wait_turns_or_explain,
)
from tests.support.pipeline import collect, discard, flush_and_wait_idle, produce_lines, scopes_of, valid_turn_counts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

TURNS, SCOPES, SEED = 3_000, 30, 20261204
SESSION_S = 6.0  # the shortest session the settings allow: how long the frozen owner keeps its partitions
HALTED = 70  # agent.halt's exit code


def _tail(worker: WorkerProcess) -> str:
    path = worker.log_path
    return path.read_text(errors="replace")[-4000:] if path.exists() else ""


def test_a_zombie_owner_cannot_write_after_its_partitions_were_restored_elsewhere(kafka_bootstrap, tmp_path):
    lines = conversations(TURNS, SCOPES, SEED)
    expected, scopes = valid_turn_counts(lines), scopes_of(lines)
    deadline = deadline_for(TURNS)
    group = fresh_settings(kafka_bootstrap, tmp_path / "group", kafka_session_timeout_s=SESSION_S)

    def member(name: str) -> WorkerProcess:
        settings = group.model_copy(update={"data_dir": tmp_path / name, "web_port": free_port()})
        return WorkerProcess(settings, kafka_bootstrap, tmp_path / f"{name}.log")

    workers: list[WorkerProcess] = []
    with ThreadPoolExecutor(1) as pool:
        ref_f = pool.submit(reference_run, kafka_bootstrap, tmp_path / "reference", lines, deadline)
        try:
            a = member("a")
            workers.append(a.start(ready_timeout_s=READY_S))
            asyncio.run(produce_lines(kafka_bootstrap, group, lines))
            wait_until(lambda: taken_in(a) >= TURNS // 10, deadline, "A to be mid-replay")
            os.kill(a.proc.pid, signal.SIGSTOP)  # a zombie: alive, connected, out of the group once its session ends
            b = member("b")
            workers.append(b.start(ready_timeout_s=READY_S))
            wait_turns_or_explain(b, expected, deadline)  # B took over, restored and applied everything
            os.kill(a.proc.pid, signal.SIGCONT)  # A goes on with the batch it held
            try:
                wait_until(lambda: a.proc.poll() is not None, 60.0, "the zombie A to halt")
            except Exception:  # noqa: BLE001 - the state check below says what A's writes did
                pass
            zombie_exit = a.proc.poll()
            for w in workers:
                w.stop()
            # Whoever restores next reads only the changelogs: what A wrote there after B's restore shows.
            c = member("c")
            workers.append(c.start(ready_timeout_s=READY_S))
            wait_turns_or_explain(c, expected, deadline)
            status = flush_and_wait_idle(c, kafka_bootstrap, group, scopes, deadline)
            run = collect(c, kafka_bootstrap, group, scopes, status)
        except BaseException:
            for w in workers:
                print(f"--- {w.log_path} ---\n{_tail(w)}")
            raise
        finally:
            for w in workers:
                if w.proc is not None and w.proc.poll() is None:
                    os.kill(w.proc.pid, signal.SIGCONT)
                discard(w)
        ref = ref_f.result()

    assert end_state_differences(run, ref) == {}
    assert zombie_exit == HALTED, f"the zombie A did not halt (exit {zombie_exit}):\n{_tail(workers[0])}"
    assert "fenced" in workers[0].log_path.read_text(errors="replace")
