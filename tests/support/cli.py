"""The command line run in the test's own process: `main(args)` as `python -m credence.streams.ops.cli` runs
it, with stdout, stderr and the exit code captured, and no CREDENCE_* settings but the ones given.

A fresh interpreter per call costs ~1.5 s (more on a loaded host); a test whose point is what the command
says and the code it exits with gets the same answer here. Tests of what only a process shows (its exit
status, a crash, signals) keep starting one."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import pytest


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str  # with what the command logged: a process's logging goes to its stderr


def in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
               caplog: pytest.LogCaptureFixture) -> Callable[..., CliResult]:
    """A `run(*args, env=None, cwd=None)` for one test (the settings it sets are undone after it). An
    exception escaping `main` propagates: it fails the test, as a traceback would."""
    from credence.streams.ops.cli import main

    def run(*args: str, env: dict | None = None, cwd=None) -> CliResult:
        for name in [k for k in os.environ if k.startswith("CREDENCE_")]:
            monkeypatch.delenv(name)
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        caplog.clear()
        with caplog.at_level(logging.INFO):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse: exit 2 and its usage on stderr, or --help's exit 0
                code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return CliResult(code, out, err + caplog.text)

    return run
