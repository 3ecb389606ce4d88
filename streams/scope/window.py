"""The Stage-1 window: when the turns a scope has buffered go out for extraction.

The background signal loop batches user conversation: a window closes on `stage1_max_batch` user turns,
when the conversation goes quiet (`stage1_quiet_seconds` between two turns, or since the last one when a
tick brings the scope's clock forward in live traffic), or when it is `stage1_max_wait_seconds` old. Every
rule reads event time only (the turns' own times and the scope's clock, which a tick record moves), so a
replay closes the same windows. With powerful memory off each user turn is extracted as it comes.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from credence.config.pipeline import PipelineSettings
from credence.records.turn import TurnRecord
from credence.tables.clock import format_instant, parse_instant


def buffered(turn: TurnRecord | dict) -> dict:
    """What a window keeps of a turn record (typed, or its wire form as a scope's queue holds it): what its
    Stage-1 payload carries."""
    if isinstance(turn, dict):
        kept = {"id": turn["turn_id"], "role": turn["role"], "text": turn["text"], "ts": turn["ts"]}
        tags = turn.get("metadata", {}).get("tags")
    else:
        kept = {"id": turn.turn_id, "role": turn.role, "text": turn.text, "ts": format_instant(turn.ts)}
        tags = list(turn.tags)
    return kept | {"tags": tags} if tags else kept  # its facts' entries inherit them


def stage1_cut(buffer: list[dict], started: datetime | None, now: datetime, pipeline: PipelineSettings, *,
               powerful: bool = True, flush: bool = False) -> int:
    """How many buffered turns, from the front, the window closes on at `now` (0: it stays open). A turn
    that came after a quiet gap starts the next window, so the turns before it go out without it."""
    if flush:
        return len(buffer)
    users = sum(1 for t in buffer if t["role"] == "user")
    if users == 0:
        return 0  # AI turns alone wait: they ride along with the next user turn
    if not powerful:
        return len(buffer)
    quiet = timedelta(seconds=pipeline.stage1_quiet_seconds)
    if now - parse_instant(buffer[-1]["ts"]) >= quiet:
        return len(buffer)
    gap = _after_last_gap(buffer, quiet)
    if gap:
        return gap
    if users >= pipeline.stage1_max_batch:
        return len(buffer)
    if started is not None and now - started >= timedelta(seconds=pipeline.stage1_max_wait_seconds):
        return len(buffer)
    return 0


def _after_last_gap(buffer: list[dict], quiet: timedelta) -> int:
    """The index of the last turn that came `quiet` or more after the turn before it, when a user turn
    precedes it (0: none)."""
    times = [parse_instant(t["ts"]) for t in buffer]
    for i in range(len(buffer) - 1, 0, -1):
        if times[i] - times[i - 1] >= quiet:
            return i if any(t["role"] == "user" for t in buffer[:i]) else 0
    return 0


def remaining_started(buffer: list[dict]) -> datetime | None:
    """A window left open after a cut starts at its first turn."""
    return parse_instant(buffer[0]["ts"]) if buffer else None
