"""Read-only web views of a worker: /status, and what the scope views (/scopes, /scope/{tenant}/{user}/
{character}, mounted behind the API's keys by streams/api/scope_views.py) show of a scope."""

from __future__ import annotations

import hmac
import math
import time
from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING

from credence import __version__
from credence.streams.llm import embeddings
from credence.streams.scope.scope_state import ScopeState
from credence.streams.state.tally import Tally
from credence.tables.clock import format_instant
from credence.tables.evidence import derived_tier
from credence.tables.rendering import render_memory_block
from credence.tables.scope import Scope
from credence.tables.tokens import default_tokenizer_name

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence


def is_ready(app) -> bool:
    """Partitions assigned and table recovery finished: the worker is consuming."""
    try:
        recovered = app.tables.recovery.completed.is_set()
    except AttributeError:
        recovered = True
    return bool(recovered and not app.rebalancing)


def is_operator(headers, operator_key) -> bool:
    """Whether the request carries the operator key (CREDENCE_API__OPERATOR_KEY); never with none set."""
    if operator_key is None:
        return False
    scheme, _, key = headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(key.strip().encode(),
                                                              operator_key.get_secret_value().encode())


def broker_text(unreachable_since: float) -> str:
    if not unreachable_since:
        return "reachable"
    from credence.outage import iso

    return f"broker unreachable since {iso(unreachable_since)}"


def entry_view(entry, now, memory) -> dict:
    score = entry.score(now, settings=memory)
    return {"id": entry.id, "kind": entry.kind, "text": entry.text, "status": entry.status,
            "score": score if math.isfinite(score) else None,
            "tier": "protected" if entry.protected else derived_tier(score, settings=memory),
            "version": entry.version, "snapshot": entry.to_dict()}


def scope_view(state: ScopeState, memory, count_tokens) -> dict:
    now = state.clock
    entries = sorted(state.entries.values(), key=lambda e: e.id)
    block = render_memory_block(Scope.parse(state.scope), entries, now, settings=memory,
                                count_tokens=count_tokens) if now else None
    return {"scope": state.scope, "clock": format_instant(now), "turns": state.turns,
            "idle": state.idle, "queued": len(state.queue), "requests": len(state.requests),
            "applied": dict(state.applied),  # input topic:partition -> the last offset applied to this scope
            "facts": len(state.facts), "entries": [entry_view(e, now, memory) for e in entries],
            "memory_block": block.text if block else ""}


def scope_reflections(state: ScopeState) -> Counter:
    """One scope's reflections per stored status (promote_blocked among them)."""
    return Counter(e.status for e in state.entries.values() if e.kind == "reflection")


def reflection_counts(states) -> dict[str, int]:
    """Reflections per stored status over the scopes this worker holds."""
    total: Counter = Counter()
    for state in states:
        total.update(scope_reflections(state))
    return dict(sorted(total.items()))


class Refreshed:
    """A value recomputed at most every `seconds` (wall clock): /status is polled often, and counting
    reflections reads every scope this worker holds."""

    def __init__(self, compute, seconds: float = 5.0, clock=time.monotonic) -> None:
        self.compute, self.seconds, self.clock = compute, seconds, clock
        self.value, self.at = None, None

    def __call__(self):
        now = self.clock()
        if self.at is None or now - self.at >= self.seconds:
            self.value, self.at = self.compute(), now
        return self.value


def register(credence: Credence) -> None:
    app, settings = credence.app, credence.settings
    store = credence.store
    tally = Tally(store, scope_reflections)  # only the scopes that moved are read again
    reflections = Refreshed(lambda: dict(sorted(tally().items())))

    def unreadable_names(request) -> dict:
        # Scope keys name a tenant and its users: only the operator's key is told which (no probe needs it).
        if not is_operator(request.headers, settings.api.operator_key):
            return {}
        return {"unreadable_scope_names": sorted(store.unreadable)}

    @app.page("/status")
    async def status(web, request):
        return web.json({
            "service": "credence", "version": __version__, "app_id": settings.app_id,
            "ready": is_ready(app) and credence.tenants.ready.is_set(),
            "stats": {k: v for k, v in asdict(credence.stats).items() if not isinstance(v, dict)},  # no tenants
            "busy_scopes": len(credence.busy),
            "state": {"held_partitions": sorted(credence.ownership.held), "live_scopes": store.live_count(),
                      "duplicate_marks": credence.marks.count(),
                      # input topic:partition -> the next offset to apply, for the partitions held
                      "positions": credence.agent.state.positions.known(credence.ownership.held),
                      "unreadable_scopes": len(store.unreadable),  # as of the last reflection count
                      "restored": asdict(credence.restored)}  # changelog records read in bulk (restore.py)
            | unreadable_names(request),
            "llm": {"backend": credence.backend.label, "stats": credence.backend.stats.as_dict(),
                    "inflight": credence.runner.inflight,
                    "concurrency_limit": credence.backend.concurrency_limit},  # adaptive; null: unbounded
            "tokenizer": default_tokenizer_name(),
            "reflections": reflections(),  # per stored status, refreshed every few seconds
            "broker": broker_text(credence.stats.broker_unreachable_since),
            "embeddings": embeddings.status(credence.encoder, getattr(credence.recall, "encoder", None)),
        })
