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

    @app.timer(interval)
    async def tick():
        now = datetime.now(timezone.utc).isoformat() if settings.pipeline.ticks_advance_clock else None
        scopes = list(credence.tables["scopes"].keys())
        for scope in scopes:
            tenant, user, character = scope.split("/")
            await credence.send("control", scope, {"v": 1, "type": "tick", "tenant": tenant, "user": user,
                                                   "character": character, "now": now})
