"""How big the fault runs are: `small` in CI, `large` when asked (--faults-size / CREDENCE_FAULTS_SIZE)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from credence.errors import ConfigError

ENV = "CREDENCE_FAULTS_SIZE"


@dataclass(frozen=True)
class Size:
    name: str
    kill_turns: int  # turns replayed in the SIGKILL test
    kill_scopes: int
    kills: int
    restart_turns: int  # turns in the broker-restart and scale-out tests
    restart_scopes: int
    seed: int = 20261203


SIZES = {
    # for developing the suite itself: seconds, not minutes
    "tiny": Size("tiny", kill_turns=300, kill_scopes=10, kills=3, restart_turns=300, restart_scopes=10),
    # CI's: 5,000 turns give each of the 50 scopes 100 (several rounds of stating, surfacing, answering and
    # retracting, and a month's silence: every path the large size takes), and ~450 turns between kills;
    # what a kill can break (a turn lost or counted twice, a version line broken) is decided at the kill
    # point, not by the replay's length, which the large size keeps at 50,000.
    "small": Size("small", kill_turns=5_000, kill_scopes=50, kills=10, restart_turns=600, restart_scopes=50),
    "large": Size("large", kill_turns=50_000, kill_scopes=200, kills=20, restart_turns=10_000, restart_scopes=100),
}


def size_named(option: str | None) -> Size:
    name = option or os.environ.get(ENV) or "small"
    if name not in SIZES:
        raise ConfigError(f"unknown fault-suite size {name!r}; use one of {sorted(SIZES)}")
    return SIZES[name]
