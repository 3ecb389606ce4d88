"""Stage-1 windows: calls per 100 turns against time to memory, for window settings (max user turns,
quiet seconds, max age), on the production-path benchmark's real-style dialogue (240 scopes of 2
sessions and 10 scopes of 24; user turns 1–6 minutes apart within a session, sessions days apart). The
window rule itself (streams/scope/window.py) runs over each scope's turns as live traffic brings them, a
tick every 60 s of wall clock moving the scope's clock while a window is open. No broker, no LLM: the
window decides the Stage-1 calls; the other tasks' calls are in production_path's rows.

    python benchmarks/window_table.py      # the markdown table
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.production_path import dialogue_lines, instant, pct  # noqa: E402
from benchmarks.report import Row  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402


def window_table(lines: list[bytes], candidates: list[tuple[int, float, float]], tick_s: float = 60.0) -> list[dict]:
    """Stage-1 calls per 100 turns against time-to-memory (a user turn to its window's close, extraction
    latency left out) for window settings (max user turns, quiet s, max age s), the window rule itself
    (streams/scope/window.py) run over each scope's turns as live traffic brings them: a tick every
    `tick_s` of wall clock moves the scope's clock while a window is open."""
    from datetime import timedelta

    from credence.streams.scope.window import remaining_started, stage1_cut

    by_scope: dict[str, list[dict]] = {}
    for t in map(json.loads, lines):
        by_scope.setdefault(f"{t['user']}/{t['character']}", []).append(t)
    out = []
    for batch, quiet, age in candidates:
        pipeline = PipelineSettings(stage1_max_batch=batch, stage1_quiet_seconds=quiet, stage1_max_wait_seconds=age)
        windows, waits = 0, []
        for turns in by_scope.values():
            buffer, started = [], None

            def close(now):
                nonlocal buffer, started, windows
                cut = stage1_cut(buffer, started, now, pipeline)
                if cut:
                    windows += 1
                    waits.extend((now - instant(t["ts"])).total_seconds() for t in buffer[:cut] if t["role"] == "user")
                    buffer = buffer[cut:]
                    started = remaining_started(buffer)
                return cut

            for i, turn in enumerate(turns):
                now = instant(turn["ts"])
                buffer.append(turn)
                started = started or now
                while close(now):
                    pass
                end = instant(turns[i + 1]["ts"]) if i + 1 < len(turns) else now + timedelta(days=1)
                tick = now + timedelta(seconds=tick_s)
                while buffer and any(t["role"] == "user" for t in buffer) and tick < end:
                    close(tick)
                    tick += timedelta(seconds=tick_s)
            if buffer:
                close(now + timedelta(days=1))
        out.append({"max_turns": batch, "quiet_s": quiet, "max_age_s": age,
                    "stage1_per_100_turns": 100 * windows / len(lines),
                    "ttm_p50_s": pct(waits, 0.5), "ttm_p90_s": pct(waits, 0.9), "ttm_p99_s": pct(waits, 0.99)})
    return out


TABLE_CANDIDATES = [(n, q, a) for n in (8, 16) for q in (60, 120, 300, 600)
                                         for a in (600, 1800, 3600) if a > q]


def inputs() -> list[bytes]:
    return dialogue_lines(240, 2, 7, "table") + dialogue_lines(10, 24, 8, "table-long")


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    default = PipelineSettings()
    out = []
    for r in window_table(inputs(), TABLE_CANDIDATES):
        chosen = (r["max_turns"], r["quiet_s"], r["max_age_s"]) == (
            default.stage1_max_batch, default.stage1_quiet_seconds, default.stage1_max_wait_seconds)
        out.append(Row("stage-1 window", f"{r['max_turns']} user turns / quiet {r['quiet_s']:g} s / max age "
                       f"{r['max_age_s']:g} s{' (default)' if chosen else ''}: Stage-1 calls per 100 turns",
                       r["stage1_per_100_turns"], unit="calls",
                       note=f"time to memory p50 {r['ttm_p50_s']:.0f} s, p90 {r['ttm_p90_s']:.0f} s, "
                            f"p99 {r['ttm_p99_s']:.0f} s"))
    return out


def main() -> int:
    print("| max user turns | quiet | max age | Stage-1 calls / 100 turns | time to memory p50 / p90 / p99 |")
    print("|---|---|---|---|---|")
    for r in window_table(inputs(), TABLE_CANDIDATES):
        print(f"| {r['max_turns']} | {r['quiet_s']:g} s | {r['max_age_s']:g} s | {r['stage1_per_100_turns']:.1f} | "
              f"{r['ttm_p50_s']:.0f} / {r['ttm_p90_s']:.0f} / {r['ttm_p99_s']:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
