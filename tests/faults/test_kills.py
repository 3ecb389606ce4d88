"""SIGKILL the worker at seeded random points of a long replay (small (CI): 5,000 turns / 50 scopes / 10 kills;
large: 50,000 turns / 200 scopes / 20 kills): the end state equals an uninterrupted run's — every entry's
snapshot, the turns per scope, the journal's distinct events — and the journal folds to the tables.

Every kill lands mid-replay by construction, and is seen to: the input after the last kill point (plus a
margin of 1/40 of the turns) is held back until the last kill is over, so right before each kill the worker
cannot have taken in every turn. Polling alone could not promise it: restarted at 9,398 of 10,000 turns, a
worker once took in the last 602 before the poll saw the next point, and killing it then killed an idle
worker, which proves less. Both runs produce the held-back tail once the head has settled (every turn
taken in, no queue, no LLM request left), so a promotion's result lands at the same place among the
scope's records in both (harness.settle)."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.faults.conversations import conversations
from tests.faults.harness import (
    deadline_for,
    end_state_differences,
    fresh_settings,
    reference_run,
    run_with_kills,
    version_order_violations,
)
from tests.support.pipeline import valid_turn_counts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]


def test_sigkill_at_random_points_ends_in_the_uninterrupted_state(faults_size, kafka_bootstrap, tmp_path):
    size = faults_size
    lines = conversations(size.kill_turns, size.kill_scopes, size.seed)
    total = sum(valid_turn_counts(lines).values())
    assert total == size.kill_turns and len(valid_turn_counts(lines)) == size.kill_scopes
    rng = random.Random(size.seed)
    points = sorted(rng.sample(range(total // 20, total * 19 // 20), size.kills))
    tail_from = min(total, points[-1] + total // 40)  # every valid line is one turn
    deadline = deadline_for(size.kill_turns)
    started = time.monotonic()
    settings = fresh_settings(kafka_bootstrap, tmp_path / "killed")
    with ThreadPoolExecutor(2) as pool:  # the two runs share nothing but the broker
        ref_f = pool.submit(reference_run, kafka_bootstrap, tmp_path / "reference", lines, deadline, (tail_from,))
        killed_f = pool.submit(run_with_kills, settings, kafka_bootstrap, lines, tmp_path / "killed" / "w.log",
                               points, deadline, tail_from)
        ref, (run, landed) = ref_f.result(), killed_f.result()
    print(f"{size.name}: {total} turns ({total - tail_from} held back), {size.kill_scopes} scopes, kills at "
          f"(turns taken, records unapplied) {[(k.taken, sum(k.unapplied.values())) for k in landed]}, "
          f"{time.monotonic() - started:.0f} s for both runs")

    assert len(landed) == size.kills
    after_the_end = [i for i, k in enumerate(landed) if not k.mid_replay]
    assert after_the_end == [], f"kills {after_the_end} landed once every input record was applied: {landed}"
    assert ref.entries and ref.archive, "the input should both keep and archive entries"
    assert {e["event"] for e in ref.journal} >= {"created", "signal", "archived"}
    assert end_state_differences(run, ref) == {}
    assert version_order_violations(run.journal) == {}
