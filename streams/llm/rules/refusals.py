"""The statements the rules backend's own gate dropped, counted per process.

The rules backend asks ``is_self_contained`` before it answers, so a statement it cannot word alone never
reaches the scope step's gate (``StepContext.refuse``). Its answers are journalled, so the count stays out
of them: this side channel counts "<stage>:<reason>" per process, and /metrics adds it to the step's
refusals at scrape time (``RulesBackend.refused``, ``WorkerCollector``)."""

from __future__ import annotations

import threading

_lock = threading.Lock()
_counts: dict[str, int] = {}


def count(stage: str, reason: str) -> None:
    """One statement the rules backend dropped for `stage`, with the gate's reason."""
    key = f"{stage}:{reason}"
    with _lock:
        _counts[key] = _counts.get(key, 0) + 1


def counts() -> dict[str, int]:
    """A copy of this process's counts since it started."""
    with _lock:
        return dict(_counts)
