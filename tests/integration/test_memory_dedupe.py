"""`credence memory dedupe` against a real worker: twins stored before the restatement rule (a worker
whose thresholds never find one) are reported by --dry-run, left alone by it, and merged by --apply
through the scope's owner, journalled; afterwards --dry-run finds none."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from credence.config.memory import MemorySettings
from credence.streams.ops.cli import main as cli
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from tests.support.pipeline import (
    DEADLINE_S,
    FAST_GROUP_ENV,
    discard,
    flush_and_wait_idle,
    pipeline_settings,
    produce_lines,
    sample_lines,
    scope_views,
    topic_values,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SCOPE = "initech/erin/tutor"
# The release before the restatement rule and correction work: near-duplicate twins were stored.
NEVER = MemorySettings(restatement_jaccard=1.0, restatement_containment_min_stems=1000, correction_work_enabled=False)


def active_personas(worker: WorkerProcess) -> list[str]:
    view = scope_views(worker, [SCOPE])[SCOPE]
    return sorted(e["text"] for e in view["entries"] if e["kind"] == "persona" and e["status"] == "active")


def test_dedupe_reports_then_merges_stored_twins(kafka_bootstrap, tmp_path, monkeypatch, capsys):
    old = pipeline_settings(kafka_bootstrap, tmp_path, f"d{uuid.uuid4().hex[:10]}", memory=NEVER)
    lines = sample_lines([SCOPE])
    asyncio.run(produce_lines(kafka_bootstrap, old, lines))
    worker = WorkerProcess(old, kafka_bootstrap, tmp_path / "old.log", extra_env=FAST_GROUP_ENV).start()
    try:
        wait_turns(worker, valid_turn_counts(lines))
        flush_and_wait_idle(worker, kafka_bootstrap, old, [SCOPE])
        twins = active_personas(worker)
    finally:
        worker.stop()
    assert twins == ["The user is learning French with a tutor.", "The user is learning French."]

    settings = old.model_copy(update={"memory": MemorySettings()})
    for key, value in settings_env(settings, kafka_bootstrap).items():
        monkeypatch.setenv(key, value)
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "new.log", extra_env=FAST_GROUP_ENV).start()
    try:
        wait_until(lambda: SCOPE in worker.get("/scopes")["scopes"], DEADLINE_S, "the scope to be restored")
        assert cli(["memory", "dedupe", SCOPE, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert "1 near-duplicate pair(s)" in out and "restates" in out
        assert active_personas(worker) == twins  # a dry run changes nothing
        assert cli(["memory", "dedupe", SCOPE, "--apply", "--by", "ops"]) == 0
        assert wait_until(lambda: active_personas(worker) == ["The user is learning French with a tutor."],
                          DEADLINE_S, "the twins to be merged")
        journal = topic_values(kafka_bootstrap, settings, "evidence")
        assert {(e["event"], e["cause"]) for e in journal if e["cause"] == "dedupe:ops"} == {
            ("merged", "dedupe:ops"), ("archived", "dedupe:ops")}
        assert cli(["memory", "dedupe", SCOPE, "--dry-run"]) == 0
        assert "0 near-duplicate pair(s)" in capsys.readouterr().out
    finally:
        discard(worker)
