"""Scale-out under faults: two workers share one consumer group, a third joins mid-replay, one of the
first two is SIGKILLed; the end state equals a one-worker run's, and every entry's journal is one
strictly increasing line of versions (no two owners ever applied one scope at once).

In the end the last two members are stopped one after the other (graceful, as a deploy does), so one
worker holds every partition and must still report its scopes idle: a member that lost and regained
partitions must not keep reporting scopes it no longer owns as busy (or the idle wait hangs).

The whole input is on the topics before the members start, as in the reference run, and the faults are
placed by how far processing got. Promotions run beside the scope (seed 000: outside the per-character
lock), so where a promotion's result lands among a scope's records decides between "promoted, then the
denial disputes the persona" and "denied first, the late result discarded". Input produced in pieces
would put results between later turns, a different record order than the reference's (results after
all input), and a different end state that no defect caused."""

from __future__ import annotations

import asyncio

import pytest

from credence.streams.ops.broker import free_port
from credence.streams.ops.process import WorkerProcess, wait_until
from tests.faults.harness import (
    deadline_for,
    end_state_differences,
    fresh_settings,
    taken_in,
    version_order_violations,
    wait_turns_or_explain,
)
from tests.support.pipeline import (
    FAST_GROUP_ENV,
    collect,
    flush_and_wait_idle,
    produce_lines,
    scopes_of,
    valid_turn_counts,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_two_workers_a_third_joins_one_is_killed_same_state_as_one(restart_lines, restart_reference,
                                                                     kafka_bootstrap, tmp_path):
    lines, ref = restart_lines, restart_reference
    deadline = deadline_for(len(lines))
    group = fresh_settings(kafka_bootstrap, tmp_path / "group", topic_partitions=4)
    scopes, expected = scopes_of(lines), valid_turn_counts(lines)

    def member(i: int) -> WorkerProcess:
        settings = group.model_copy(update={"data_dir": tmp_path / f"w{i}", "web_port": free_port()})
        return WorkerProcess(settings, kafka_bootstrap, tmp_path / f"w{i}.log", extra_env=FAST_GROUP_ENV)

    def progress(workers) -> int:
        return sum(taken_in(w) for w in workers)

    third = len(lines) // 3
    workers = [member(1), member(2)]
    try:
        asyncio.run(produce_lines(kafka_bootstrap, group, lines))
        for w in workers:
            w.start(ready_timeout_s=300)
        wait_until(lambda: progress(workers) >= third // 2, deadline, "two members to be mid-replay")
        workers.append(member(3).start(ready_timeout_s=300))  # joins: the group rebalances mid-stream
        wait_until(lambda: progress(workers) >= third + third // 2, deadline, "three members to be mid-replay")
        workers[0].kill()  # SIGKILL one of the first two: its partitions move after its session times out
        survivor = workers[1]
        workers[2].stop()  # graceful: its partitions move to the survivor
        wait_turns_or_explain(survivor, expected, deadline, group=(kafka_bootstrap, group))
        status = flush_and_wait_idle(survivor, kafka_bootstrap, group, scopes, deadline)
        run = collect(survivor, kafka_bootstrap, group, scopes, status)
    except BaseException:
        for w in workers:
            print(f"--- {w.log_path} ---\n{w.log_path.read_text(errors='replace')[-3000:] if w.log_path.exists() else ''}")
        raise
    finally:
        for w in workers:
            w.stop()

    assert end_state_differences(run, ref) == {}
    assert version_order_violations(run.journal) == {}
