"""The copy-paste starts of the README and the docs site run as written: every block marked `<!-- runnable -->`
is run, in reading order (the README, then the pages in mkdocs.yml's nav order), in a shell whose PATH starts
with this venv (an activated venv, as the docs ask), in a fresh folder holding the checkout's `streams/` (the
shipped sample's path), against one worker on the suite's broker. An archive query runs against an archive
drained from that worker's journal. A wrong example fails here.

bash/sh blocks run with `bash -e`; a sql block goes to `credence archive query`; a python block to `python -`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE, EVIDENCE
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from tests.support.pipeline import idle_status, pipeline_settings, sample_lines, scopes_of
from tests.support.readme_blocks import Block, all_runnable_blocks, reads_the_archive

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
BLOCK_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def worker(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("readme")
    settings = pipeline_settings(kafka_bootstrap, root, f"readme{uuid.uuid4().hex[:8]}", archive={
        "root": str(root / "archive"), "group_id": f"readme-sink-{uuid.uuid4().hex[:8]}"})
    process = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start()
    try:
        yield process, settings, root
    finally:
        process.stop()


def run(block: Block, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    if block.language == "sql":
        argv, stdin = ["credence", "archive", "query", block.code], None
    elif block.language == "python":
        argv, stdin = ["python", "-"], block.code
    else:
        argv, stdin = ["bash", "-e", "-o", "pipefail", "-c", block.code], None
    return subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S, stdin=None if stdin is not None else subprocess.DEVNULL)


def test_every_runnable_block_of_the_docs_runs_as_written(worker, kafka_bootstrap):
    process, settings, root = worker
    blocks = all_runnable_blocks(ROOT)
    assert blocks, "no block is marked runnable"
    cwd = root / "checkout"
    cwd.mkdir()
    (cwd / "streams").symlink_to(ROOT / "streams")  # the sample's path, as from the checkout
    env = settings_env(settings, kafka_bootstrap) | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    drained = False
    for block in blocks:
        if reads_the_archive(block) and not drained:
            drain_the_journal(process, settings, kafka_bootstrap)
            drained = True
        result = run(block, env, cwd)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (
            f"{block} failed (exit {result.returncode}):\n{block.code}\n--- stdout\n{result.stdout[-2000:]}"
            f"\n--- stderr\n{result.stderr[-3000:]}\n(worker log: {process.log_path})")


def drain_the_journal(process: WorkerProcess, settings, bootstrap: str) -> None:
    """What the archive queries read: the worker idle after the replay's flush, its journal drained."""
    scopes = scopes_of(sample_lines())
    wait_until(lambda: idle_status(process, scopes), 90, f"the worker to idle (log: {process.log_path})")

    async def both():
        for table in (ARCHIVE, EVIDENCE):
            await drain(bootstrap, settings.topic(table), table, settings.archive)
    asyncio.run(both())
