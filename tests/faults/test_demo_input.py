"""`credence demo --input FILE` as a user runs it, with records a new user writes by mistake: ids with
'/', '..', edge spaces. The worker dead-letters them; the demo finishes with its summary, exit 0, and no
traceback anywhere (the end-of-input flush once split scope keys on '/')."""

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


def run_demo(path, tmp_path, kafka_bootstrap) -> subprocess.CompletedProcess:
    env = dict(os.environ, CREDENCE_KAFKA_BOOTSTRAP=kafka_bootstrap, CREDENCE_DATA_DIR=str(tmp_path / "data"),
               CREDENCE_LLM__BACKEND="rules")
    return subprocess.run(
        [sys.executable, "-m", "credence.streams.ops.cli", "demo", "--input", str(path), "--timeout", "180"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)


def test_demo_with_slash_and_dot_ids_ends_with_its_summary(tmp_path, kafka_bootstrap):
    good = [turn("acme", "alice", "barista", f"g-{i}", i) for i in range(8)]
    bad = [turn("acme", "ali/ce", "barista", "b-1", 1), turn("acme", "alice", "bar/ista", "b-2", 2),
           turn("acme/x", "alice", "barista", "b-3", 3), turn("acme", "..", "barista", "b-4", 4),
           turn("acme", " alice", "barista", "b-5", 5)]
    lines = good[:4] + bad + good[4:]
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))

    result = run_demo(path, tmp_path, kafka_bootstrap)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-3000:]
    assert result.returncode == 0, output[-3000:]
    match = SUMMARY.match(result.stdout.strip().splitlines()[-1])
    assert match and (int(match[1]), int(match[2])) == (len(lines), len(bad)), result.stdout[-2000:]
    assert "== acme/alice/barista: 8 turns" in result.stdout
