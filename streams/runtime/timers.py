"""Wall-clock ticks: each owned scope gets a tick record on its own partition, so time-driven work
(window flush, hourly sweep, weak-memory fallback, re-issuing lost LLM requests) runs in the scope's
order through the same pure step as everything else."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

log = logging.getLogger(__name__)


def register(credence) -> None:
    app, settings = credence.app, credence.settings
    interval = settings.pipeline.tick_interval_seconds
    if interval <= 0:
        return

    scanned = {"done": False}

    @app.timer(interval)
    async def tick():
        advance = settings.pipeline.ticks_advance_clock
        now = datetime.now(timezone.utc).isoformat() if advance else None
        if not advance and not scanned["done"]:
            # After a (re)start the in-memory busy set is empty: find the scopes with unfinished work
            # (e.g. LLM requests lost with the previous run) once, from the recovered table.
            for scope, value in list(credence.tables["scopes"].items()):
                if value and (value.get("requests") or value.get("queue") or value.get("buffer")):
                    credence.busy.add(scope)
            scanned["done"] = True
        # A timed tick moves every scope's clock (sweeps, windows, fallback); an untimed one only
        # re-issues lost or failed requests, so only scopes with work in flight need it.
        scopes = list(credence.tables["scopes"].keys()) if advance else list(credence.busy)
        for scope in scopes:
            tenant, user, character = scope.split("/")
            await credence.send("control", scope, {"v": 1, "type": "tick", "tenant": tenant, "user": user,
                                                   "character": character, "now": now})
