"""When this worker's local stores of each partition were last known in step with their changelogs, and
whether a store found on disk may be brought up to date from its persisted offsets or must be discarded.

Why a store behind the tombstone horizon, or ahead of its changelog, is discarded: docs/state.md.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

log = logging.getLogger(__name__)

TRUST_SHARE = 0.5  # of the changelogs' tombstone retention a store may have been out of step
EVERY_SECONDS = 60.0  # a flush records the time again at most this often (or a tenth of the trust)


class Freshness:
    def __init__(self, directory: Path | None, tombstone_seconds: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.directory = directory  # None: stores that do not outlive the process (memory)
        self.trust = TRUST_SHARE * tombstone_seconds
        self._every = min(EVERY_SECONDS, self.trust / 10)
        self._clock = clock
        self._recorded: dict[int, float] = {}  # partition -> the time last written

    def touch(self, partitions: Iterable[int], force: bool = False) -> None:
        """Record that the stores of `partitions` are in step now (this worker holds them, restored)."""
        if self.directory is None:
            return
        now = self._clock()
        for p in partitions:
            if force or now - self._recorded.get(p, float("-inf")) >= self._every:
                self._write(p, now)

    def age(self, partition: int) -> float | None:
        """Seconds since the stores of `partition` were last known in step; None if never recorded."""
        if self.directory is None:
            return None
        try:
            return self._clock() - float(self._path(partition).read_text())
        except (OSError, ValueError):
            return None

    def distrust(self, partition: int, persisted: int | None, end: int | None) -> str | None:
        return distrust(persisted, self.age(partition), end, self.trust)

    def _write(self, partition: int, now: float) -> None:
        path = self._path(partition)
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(repr(now))
        os.replace(scratch, path)  # whole or not at all: a torn record would read as none (untrusted)
        self._recorded[partition] = now

    def _path(self, partition: int) -> Path:
        assert self.directory is not None
        return self.directory / "in-step" / f"{partition}"


def distrust(persisted: int | None, age: float | None, end: int | None, trust: float) -> str | None:
    """Why a local store that holds data, with changelog offsets up to `persisted` (None: not recorded) and
    last in step `age` seconds ago (None: not recorded), must be discarded before a restore whose changelog
    ends at offset `end`; None if it may be brought up to date from `persisted`."""
    if persisted is not None and end is not None and persisted > end:
        return (f"it holds changelog offsets up to {persisted}, past the changelog's end ({end}): the "
                f"changelog was recreated or lost records")
    if age is None:
        return "nothing records when it was last in step with its changelog"
    if abs(age) > trust:
        return (f"it was last in step with its changelog {age:.0f} s ago, beyond the {trust:.0f} s within "
                f"which every deletion since is sure to still be in the changelog")
    return None
