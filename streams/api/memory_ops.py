"""Memory operations on the /v1 API: recall hits become usage records, soft-archived entries are restored, external
consensus is set, ripe entries are nominated across the bridge. Writes go through topics, so the scope's
owner applies them in order; nothing of a refused request is produced."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from credence import api_models as models
from credence.errors import ApiError, BridgeError, RecordError
from credence.records.control import consensus_record, decode_control, restore_record
from credence.records.topics import TOPICS
from credence.records.usage import usage_record
from credence.streams.state.versions import Truncated
from credence.tables.clock import format_instant
from credence.tables.entries import ARCHIVED, Entry
from credence.tables.usage import PROMPT, RECALL, prompt_hits


def _raw(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def recallable(entries: list[Entry]) -> list[Entry]:
    """The active view recall searches: soft-archived entries (kept in the scope) are left out."""
    return [e for e in entries if e.status != ARCHIVED]


def usage_ids(hit_ids: list[str], entries: list[Entry]) -> list[str]:
    """The hits that reinforce: the scope's own, non-protected entries (card entries keep no usage)."""
    own = {e.id for e in entries if not e.protected}
    return [i for i in dict.fromkeys(hit_ids) if i in own]


async def record_recall(handlers, scope, response: models.RecallResponse, entries: list[Entry], now: datetime):
    """One usage record (source "recall") for the hits actually returned to the caller."""
    ids = usage_ids([h.id for h in response.hits], entries)
    if ids:
        await handlers.send_soon(TOPICS.usage, scope.key, _raw(usage_record(scope.key, ids, RECALL, now)))


async def record_prompt(handlers, scope, response: models.PromptResponse, entries: list[Entry], now: datetime):
    """One usage record (source "prompt") for the entries a served memory block rendered whose use today
    is not counted yet. A cached answer sends nothing: it is served only while the scope (its entries and
    clock) is unchanged since the render that sent it."""
    by_id = {e.id: e for e in entries}
    ids = prompt_hits((by_id[p.id] for p in response.entries if p.id in by_id), now)
    if ids:
        await handlers.send_soon(TOPICS.usage, scope.key, _raw(usage_record(scope.key, ids, PROMPT, now)))


async def restore(handlers, call) -> tuple[int, models.MemoryActionResponse]:
    scope, state, entries, card = handlers.scope_data(call)
    entry_id = call.params["entry_id"]
    entry = state.entries.get(entry_id) if state else None
    if entry is None:
        raise ApiError(404, f"no entry {entry_id!r} in this scope")
    if entry.status != ARCHIVED or entry.usage.soft_archived_from is None:
        raise ApiError(409, f"{entry_id!r} is {entry.status}, not soft-archived by the usage sweep: nothing to restore")
    body: models.MemoryActionRequest = call.body
    # At the scope's clock, like the API's reads: the restore lands in the scope's own event time.
    record = restore_record(scope.key, entry_id, body.by, state.clock or datetime.now(UTC))
    await handlers.send(TOPICS.control, scope.key, _raw(record))
    return 202, models.MemoryActionResponse(entry_id=entry_id, requested="restore")


async def consensus(handlers, call) -> tuple[int, models.MemoryActionResponse]:
    scope, state, entries, card = handlers.scope_data(call)
    entry_id = call.params["entry_id"]
    if any(e.id == entry_id for e in card):
        raise ApiError(409, f"{entry_id!r} is a character-card entry: protected, it takes no consensus score")
    if state is None or entry_id not in state.entries:
        raise ApiError(404, f"no entry {entry_id!r} in this scope")
    body: models.ConsensusRequest = call.body
    # At the scope's clock, like the API's reads: the consensus lands in the scope's own event time.
    record = consensus_record(scope.key, entry_id, body.score, body.by, state.clock or datetime.now(UTC))
    try:
        decode_control(_raw(record))  # the topic's own decoder: what the stream will accept
    except RecordError as exc:
        raise ApiError(422, str(exc)) from None
    await handlers.send(TOPICS.control, scope.key, _raw(record))
    return 202, models.MemoryActionResponse(entry_id=entry_id, requested="consensus")


async def nominate(handlers, call) -> tuple[int, models.MemoryActionResponse]:
    from credence.streams.runtime.journal import candidate_from_journal, journal_of

    settings = handlers.credence.settings
    if not settings.bridge.bridge_enabled:
        raise ApiError(409, "the bridge to verified facts is retired (bridge_enabled is false): nothing was "
                            "nominated; an operator sets CREDENCE_BRIDGE__BRIDGE_ENABLED=true to open it")
    scope, state, entries, card = handlers.scope_data(call)
    entry_id = call.params["entry_id"]
    if state is None or entry_id not in state.entries:
        raise ApiError(404, f"no entry {entry_id!r} in this scope")
    bootstrap = getattr(handlers, "bootstrap", None) or settings.kafka_bootstrap
    events = await journal_of(bootstrap, settings, entry_id, scope)
    try:
        candidate = candidate_from_journal(events, entry_id, datetime.now(UTC), call.body.by, settings,
                                           state.incarnation)  # never a forgotten incarnation's
    except BridgeError as exc:
        raise ApiError(409, str(exc)) from None
    await handlers.send(TOPICS.fact_candidates, scope.key, _raw(candidate))
    return 202, models.MemoryActionResponse(entry_id=entry_id, requested="nominate",
                                            candidate_id=candidate["candidate_id"])


async def entries_as_of(handlers, scope, at: datetime) -> list[Entry]:
    """What was valid in ``scope`` at ``at``: the scope's kept entry versions (streams/state/versions.py),
    folded by tables.validity.as_of off the event loop, a bounded number of reads per entry. Never the
    journal: it keeps what a forget removed, and reading a scope from it is a scan of a shared partition.
    A scope with no state (never written to, or its user forgotten) has nothing to answer."""
    state = handlers.store.get(scope.key)
    if state is None:
        raise ApiError(404, "this scope has no state (never written to, or its user was forgotten): "
                            "nothing was valid in it at any instant this worker can answer for")
    try:
        return await asyncio.to_thread(handlers.store.as_of, state, at)
    except Truncated as exc:
        raise ApiError(410, f"as_of is before the versions kept of entry {exc.entry_id!r} (from "
                            f"{format_instant(exc.oldest)}); the Parquet journal's entry_versions view "
                            f"answers older instants") from None
