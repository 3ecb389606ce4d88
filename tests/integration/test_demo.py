"""The main job as a user runs it: `credence demo --input FILE` against the session's broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.turns import turn

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SUMMARY = re.compile(r"^processed (\d+) turns \((\d+) rejected\) in (\d+(?:\.\d+)?) s$")


def write_input(path, n_valid: int = 24) -> tuple[int, int]:
    """A small conversation file: valid turns (one exact duplicate), three invalid lines, a blank line."""
    lines = []
    for i in range(n_valid):
        who = ("alice", "barista") if i % 2 == 0 else ("bob", "tutor")
        lines.append(json.dumps(turn("acme", who[0], who[1], f"demo-{i}", i)))
    lines.append(lines[0])  # an exact duplicate: sent, processed, not counted twice
    invalid = ['{"v":1,"tenant":"acme"', json.dumps(turn("acme", "alice", "barista", "demo-x", 0, role="narrator")),
               json.dumps(turn("acme", "alice", "barista", "demo-y", 0, ts="2026-09-01T09:00:00"))]
    lines[5:5] = invalid
    lines.insert(9, "")  # blank lines are skipped by the replayer
    path.write_text("\n".join(lines) + "\n")
    return n_valid + 1 + len(invalid), len(invalid)


def test_demo_processes_a_file_and_ends_with_the_summary_line(tmp_path, kafka_bootstrap):
    sent, rejected = write_input(tmp_path / "turns.jsonl")
    env = dict(os.environ, CREDENCE_KAFKA_BOOTSTRAP=kafka_bootstrap, CREDENCE_DATA_DIR=str(tmp_path / "data"),
               CREDENCE_LLM__BACKEND="rules")
    result = subprocess.run(
        [sys.executable, "-m", "credence.streams.ops.cli", "demo", "--input", str(tmp_path / "turns.jsonl"),
         "--timeout", "180"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    match = SUMMARY.match(last)
    assert match, f"last line is not the summary: {last!r}"
    assert (int(match[1]), int(match[2])) == (sent, rejected)
    assert "duplicates dropped: 1" in result.stdout
