"""Wall-clock ticks: each held scope gets a tick record on its own partition, so time-driven work
(window flush, hourly sweep, weak-memory fallback, re-issuing lost LLM requests) runs in the scope's
order through the same pure step as everything else. Ticks and the busy set follow the partitions this
worker holds now; partitions it gains are scanned once (after their recovery) for unfinished work."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from credence.records.control import tick_record
from credence.records.topics import TOPICS
from credence.streams.runtime.views import is_ready
from credence.tables.clock import format_instant

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

log = logging.getLogger(__name__)


def scan_unfinished(credence: Credence) -> set[int]:
    """Mark busy the scopes of newly held partitions that have work in flight (e.g. LLM requests lost
    with the worker that held them before): the in-memory busy set knows nothing of them. Returns the
    partitions scanned."""
    ownership, store = credence.ownership, credence.store
    partitions = set(ownership.unscanned)
    if not partitions:
        return partitions
    for scope in store.scopes():
        if ownership.partition_of(scope) in partitions:
            summary = store.summary(scope)
            if summary is not None and not summary.idle:
                ownership.busy.add(scope)
    ownership.unscanned -= partitions
    log.info("scanned partitions %s for unfinished work: %d busy scopes", sorted(partitions),
             len(ownership.busy))
    return partitions


async def tick_once(credence: Credence) -> int:
    """Send one tick to each scope that needs one; returns how many were sent."""
    advance = credence.settings.pipeline.ticks_advance_clock
    now = format_instant(datetime.now(UTC)) if advance else None
    ownership = credence.ownership
    # A timed tick moves every scope's clock (sweeps, windows, fallback); an untimed one only re-issues
    # lost or failed requests, so only scopes with a request open need it.
    if advance:
        scopes = [s for s in credence.store.scopes() if ownership.owns(s)]
    else:
        scopes = [s for s in list(ownership.busy) if ownership.owns(s) and _waiting(credence, s)]
    ticks = []
    for scope in scopes:
        ticks.append((scope, tick_record(scope, now)))
    await credence.agent.send_many(TOPICS.control, ticks)
    return len(ticks)


def _waiting(credence: Credence, scope: str) -> bool:
    """Whether the scope has an open request that an untimed tick could re-issue: not one being answered
    by this worker's runner right now (issued by this run, not failed, no back-off: the tick would find
    nothing to do but load and step the scope). Skipping it is the same as its tick arriving after the
    answer, an order wall-clock ticks already take."""
    summary = credence.store.summary(scope)
    return bool(summary and summary.requests) and credence.runner.waiting(scope, summary.requests)


def register(credence: Credence) -> None:
    interval = credence.settings.pipeline.tick_interval_seconds
    if interval <= 0:
        return

    @credence.app.timer(interval)
    async def tick():
        if not is_ready(credence.app):
            return  # partitions moving or recovering: the scan and the ticks wait for the tables
        scanned = scan_unfinished(credence)
        if scanned:
            await credence.agent.rewind_held(scanned)
        await tick_once(credence)
