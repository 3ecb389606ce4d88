"""Scale-out under faults: two workers share one consumer group, a third joins mid-replay, one of the
first two is SIGKILLed; the end state equals a one-worker run's, and every entry's journal is one
strictly increasing line of versions (no two owners ever applied one scope at once).

In the end the last two members are stopped one after the other (graceful, as a deploy does), so one
worker holds every partition and must still report its scopes idle: a member that lost and regained
partitions must not keep reporting scopes it no longer owns as busy (or the idle wait hangs).

The join and the SIGKILL land mid-replay by construction, and are seen to: the input comes in three pieces
(conftest.restart_cuts) and the last is produced only after the third member's first assignment and the
kill. Polling could not promise it: two members apply CI's 600 turns in < 8 s, a third needs 10-12 s to its
first assignment, so with the whole input produced first the join landed on a replay already applied (a
rebalance at rest). The second piece goes out when the third member's web port answers, so the first two
are usually still applying it when the group rebalances. (That is how a member given Faust's leader topic
was seen to fence the holder of input partition 0, which halted: restore.py.)

Promotions run beside the scope (seed 000: outside the per-character lock), so where a promotion's result
lands among a scope's records decides between "promoted, then the denial disputes the persona" and "denied
first, the late result discarded". So each piece goes out once the input before it has settled (every
turn taken in, no queue, no LLM request left: harness.settle), and the reference run is cut and settled at
the same places: both put every result ahead of the pieces after it, whatever the machine's speed."""

from __future__ import annotations

import asyncio

import pytest

from credence.streams.ops.broker import free_port
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.faults.harness import (
    READY_S,
    deadline_for,
    end_state_differences,
    fresh_settings,
    input_ends,
    landing,
    settle,
    version_order_violations,
    wait_turns_or_explain,
)
from tests.support.pipeline import (
    FAST_GROUP_ENV,
    collect,
    discard,
    flush_and_wait_idle,
    produce_lines,
    scopes_of,
    valid_turn_counts,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


def test_two_workers_a_third_joins_one_is_killed_same_state_as_one(restart_lines, restart_cuts, restart_reference,
                                                                     kafka_bootstrap, tmp_path):
    lines, ref = restart_lines, restart_reference
    deadline = deadline_for(len(lines))
    group = fresh_settings(kafka_bootstrap, tmp_path / "group", topic_partitions=4)
    scopes, expected = scopes_of(lines), valid_turn_counts(lines)
    total, (first, second) = sum(expected.values()), restart_cuts

    def member(i: int) -> WorkerProcess:
        settings = group.model_copy(update={"data_dir": tmp_path / f"w{i}", "web_port": free_port()})
        return WorkerProcess(settings, kafka_bootstrap, tmp_path / f"w{i}.log", extra_env=FAST_GROUP_ENV)

    workers = [member(1), member(2)]
    try:
        asyncio.run(produce_lines(kafka_bootstrap, group, lines[:first]))
        for w in workers:
            w.start(ready_timeout_s=READY_S)
        settle(workers, lines[:first], deadline)
        # Launched here, not in a helper thread: a worker dies with the thread that started it.
        workers.append(member(3).launch())
        joiner = workers[2]
        wait_until(lambda: joiner.get("/status"), READY_S, "the third member's web port")
        asyncio.run(produce_lines(kafka_bootstrap, group, lines[first:second]))  # applied while it joins
        ends = input_ends(kafka_bootstrap, group)
        wait_until(lambda: joiner.get("/status")["state"]["held_partitions"], deadline,
                   "the third member's first assignment")
        # Read once the join's rebalance has ended: while scopes move, the members' counts miss some turns.
        # The SIGKILL lands right after (the second piece may still be being applied).
        wait_until(lambda: all(w.get("/status")["ready"] for w in workers), deadline, "the join's rebalance to end")
        joined = wait_until(lambda: landing(workers, group, ends, total), deadline, "the members' positions")
        killed = wait_until(lambda: landing(workers, group, ends, total), deadline, "the members' positions")
        workers[0].kill()  # SIGKILL one of the first two: its partitions move after its session times out
        survivor = workers[1]
        settle(workers[1:], lines[:second], deadline)
        asyncio.run(produce_lines(kafka_bootstrap, group, lines[second:]))
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
            discard(w)

    print(f"the join's rebalance ended at {joined}, SIGKILL at {killed}")
    assert joined.mid_replay, f"the third member joined once every input record was applied: {joined}"
    assert killed.mid_replay, f"the SIGKILL landed once every input record was applied: {killed}"
    assert end_state_differences(run, ref) == {}
    assert version_order_violations(run.journal) == {}
