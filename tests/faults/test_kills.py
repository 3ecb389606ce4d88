"""SIGKILL the worker at seeded random points of a long replay (small (CI): 10,000 turns / 50 scopes / 20 kills;
large: 50,000 turns / 200 scopes / 20 kills): the end state equals an uninterrupted run's — every entry's
snapshot, the turns per scope, the journal's distinct events — and the journal folds to the tables."""

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
    print(f"{size.name}: {total} turns, {size.kill_scopes} scopes, kills at {landed}, "
          f"{time.monotonic() - started:.0f} s for both runs")

    assert len(landed) == size.kills
    assert ref.entries and ref.archive, "the input should both keep and archive entries"
    assert {e["event"] for e in ref.journal} >= {"created", "signal", "archived"}
    assert end_state_differences(run, ref) == {}
    assert version_order_violations(run.journal) == {}
