"""SIGKILL the worker at seeded random points of a long replay (small (CI): 10,000 turns / 50 scopes / 20 kills;
large: 50,000 turns / 200 scopes / 20 kills): the end state equals an uninterrupted run's — every entry's
snapshot, the turns per scope, the journal's distinct events — and the journal folds to the tables.

Every kill is seen to land mid-replay: right before it, the worker had not taken in every turn, or reported
input it had not applied (its /status positions short of the turns topic's end). A worker that outran the polling would have
turned the later kills into kills of an idle worker, which prove less."""

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
    deadline = deadline_for(size.kill_turns)
    started = time.monotonic()
    settings = fresh_settings(kafka_bootstrap, tmp_path / "killed")
    with ThreadPoolExecutor(2) as pool:  # the two runs share nothing but the broker
        ref_f = pool.submit(reference_run, kafka_bootstrap, tmp_path / "reference", lines, deadline)
        killed_f = pool.submit(run_with_kills, settings, kafka_bootstrap, lines, tmp_path / "killed" / "w.log",
                               points, deadline)
        ref, (run, landed) = ref_f.result(), killed_f.result()
    print(f"{size.name}: {total} turns, {size.kill_scopes} scopes, kills at (turns taken, records unapplied) "
          f"{[(k.taken, sum(k.unapplied.values())) for k in landed]}, {time.monotonic() - started:.0f} s for both runs")

    assert len(landed) == size.kills
    after_the_end = [i for i, k in enumerate(landed) if not k.mid_replay]
    assert after_the_end == [], f"kills {after_the_end} landed once every input record was applied: {landed}"
    assert ref.entries and ref.archive, "the input should both keep and archive entries"
    assert {e["event"] for e in ref.journal} >= {"created", "signal", "archived"}
    assert end_state_differences(run, ref) == {}
    assert version_order_violations(run.journal) == {}
