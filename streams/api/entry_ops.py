"""One entry at a time on /v1: DELETE an entry with an erasure receipt, POST "remember this", PUT
an entry's text.

Both are control records the scope's owner applies in order (streams/scope/erase.py). The delete waits
(bounded) until the owner applied it, then finishes what lives outside the stream: the recall index of the
scope is dropped, and the Parquet archive is marked and rewritten (sinks/erase.py). The receipt counts each
store's keys of the entry before and after, so it says what was removed and that nothing is left.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime

from credence import api_models as models
from credence.errors import ApiError, CredenceError, RecordError
from credence.records.control import decode_control, edit_record, erase_record, remember_record
from credence.records.topics import TOPICS
from credence.streams.api import reads
from credence.streams.scope.erase import doomed, refusal
from credence.tables.origin import fact_id
from credence.tables.statement import is_self_contained

POLL_S = 0.05


def _raw(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def _checked(record: dict) -> bytes:
    raw = _raw(record)
    try:
        decode_control(raw)  # the topic's own decoder: what the stream will accept
    except RecordError as exc:
        raise ApiError(422, str(exc)) from None
    return raw


async def delete_entry(handlers, call) -> tuple[int, models.ErasureReceipt]:
    scope, state, entries, card = handlers.scope_data(call)
    entry_id = call.params["entry_id"]
    if any(e.id == entry_id for e in card):
        raise ApiError(409, f"{entry_id!r} is a character-card entry: the card is changed with PUT …/card")
    why = refusal(state, entry_id) if state is not None else "missing"
    by, reason = call.query.get("by") or "user", call.query.get("reason") or None
    if why == "missing" and state is not None and entry_id in state.erased:
        return 200, await _again(handlers, scope, entry_id, state.erased[entry_id], reason)
    if why == "missing":
        raise ApiError(404, f"no entry {entry_id!r} in this scope")
    if why is not None:
        raise ApiError(409, f"{entry_id!r} is {why}: its content lives there; delete that entry")
    ids = [e.id for e in doomed(state, entry_id)]
    before = {i: handlers.store.footprint(scope.key, i) for i in ids}
    raw = _checked(erase_record(scope.key, entry_id, by, reason, state.clock or datetime.now(UTC)))
    await handlers.send(TOPICS.control, scope.key, raw)
    erased_at = await _wait_erased(handlers, scope.key, ids, state.entries[entry_id].version)
    after = {i: handlers.store.footprint(scope.key, i) for i in ids}
    stores = _table_stores(handlers, before, after)
    kept = [_journal_kept(handlers)]
    if erased_at is not None:
        stores.append(_drop_recall(handlers, scope.key))
        archived = await _erase_archive(handlers, scope, ids)
        (stores if archived.remaining == 0 else kept).append(archived)
    return 200, models.ErasureReceipt(
        entry_id=entry_id, erased_ids=ids, applied=erased_at is not None, by=by, reason=reason, at=erased_at,
        stores=stores, kept=kept)


async def _again(handlers, scope, entry_id: str, gone: dict, reason: str | None) -> models.ErasureReceipt:
    """A delete of an entry already deleted (a retry after a wait that ran out, or an archive not reached):
    nothing is sent; what lives outside the stream is finished again (idempotent) and counted."""
    now = {entry_id: handlers.store.footprint(scope.key, entry_id)}
    stores = [*_table_stores(handlers, now, now), _drop_recall(handlers, scope.key)]
    kept = [_journal_kept(handlers)]
    archived = await _erase_archive(handlers, scope, [entry_id])
    (stores if archived.remaining == 0 else kept).append(archived)
    return models.ErasureReceipt(entry_id=entry_id, erased_ids=[entry_id], applied=True, by=gone["by"],
                                 reason=reason, at=datetime.fromisoformat(gone["at"].replace("Z", "+00:00")),
                                 stores=stores, kept=kept)


async def _wait_erased(handlers, scope: str, ids: list[str], version: int) -> datetime | None:
    """The event time the owner erased the entry at (its next version), once the batch's deletions reached
    the tables; None when not within the wait."""
    loop = asyncio.get_running_loop()
    end = loop.time() + handlers.credence.settings.api.feedback_wait_seconds
    while True:
        state = handlers.store.control(scope)
        gone = (state.erased if state is not None else {}).get(ids[0])
        if gone is not None and gone["version"] > version and not any(
                any(handlers.store.footprint(scope, i).values()) for i in ids):
            return datetime.fromisoformat(gone["at"].replace("Z", "+00:00"))
        if loop.time() >= end:
            return None
        await asyncio.sleep(POLL_S)


_TABLES = (("entries", "scope state", "the entry's own key in the entries table"),
           ("history", "signal history", "its signal-history chunks in the history table"),
           ("versions", "entry versions", "its kept versions (as-of reads) in the history table"))


def _table_stores(handlers, before: dict, after: dict) -> list[models.StoreErasure]:
    app_id = handlers.credence.settings.app_id
    out, tombstones, left = [], 0, 0
    for key, store, detail in _TABLES:
        removed = sum(b[key] - after[i][key] for i, b in before.items())
        remaining = sum(a[key] for a in after.values())
        tombstones, left = tombstones + removed, left + remaining
        out.append(models.StoreErasure(store=store, removed=removed, remaining=remaining, detail=detail))
    out.append(models.StoreErasure(
        store="changelogs", removed=tombstones, remaining=left,
        detail=f"a tombstone per key on {app_id}-entries-changelog and {app_id}-history-changelog (compacted: "
               "compaction keeps the tombstone, not the value); the scope's control value is rewritten "
               "without the entry"))
    return out


def _drop_recall(handlers, scope: str) -> models.StoreErasure:
    service = getattr(handlers.credence, "recall", None)
    if service is not None:
        service.forget(scope)
    return models.StoreErasure(store="recall index", removed=int(service is not None), detail=(
        "the scope's cached BM25 postings and embedding vectors dropped; the next recall indexes the scope "
        "without the entry" if service is not None else "no recall service on this worker"))


async def _erase_archive(handlers, scope, ids: list[str]) -> models.StoreErasure:
    from credence.sinks.erase import erase_entry

    settings = handlers.credence.settings
    state = handlers.store.control(scope.key)
    root = settings.archive.root
    rows = rewritten = deleted = 0
    try:
        for i in ids:
            below = state.erased[i]["version"]
            report = await asyncio.to_thread(erase_entry, root, scope, i, state.incarnation, below, settings.archive)
            rows, rewritten, deleted = rows + report.rows_removed, rewritten + report.shards_rewritten, \
                deleted + report.shards_deleted
    except CredenceError as exc:
        return models.StoreErasure(store="Parquet archive", removed=rows, remaining=-1, detail=(
            f"not reached ({exc}); DELETE again (idempotent) once {root} is reachable"))
    return models.StoreErasure(store="Parquet archive", removed=rows, detail=(
        f"rows under {root}: {rewritten} shards rewritten, {deleted} deleted; an erase marker keeps every later "
        "sink write from bringing them back"))


def _journal_kept(handlers) -> models.StoreErasure:
    settings = handlers.credence.settings
    return models.StoreErasure(store="journal topic", removed=0, remaining=0, detail=(
        f"the entry's earlier events stay on {settings.topic(TOPICS.evidence)} and {settings.topic(TOPICS.archive)} until "
        "their retention (journal_retention_hours) or an operator's compaction, as for forget; nothing reads "
        "them back: the journal's folds leave the entry out from its 'erased' event, which keeps no text"))


async def post_entries(handlers, call) -> tuple[int, models.RememberResponse]:
    body: models.RememberRequest = call.body
    scope = call.scope
    text = " ".join(body.text.split())
    ok, why = is_self_contained(text)
    if not ok:
        raise ApiError(422, f"text is not a statement a memory can keep on its own ({why}): say who and what, "
                            "e.g. 'The user is allergic to peanuts.'")
    remember_id = "rem-" + uuid.uuid4().hex
    state = handlers.store.control(scope.key)
    at = state.clock if state is not None and state.clock else datetime.now(UTC)
    raw = _checked(remember_record(scope.key, remember_id, text, body.importance, body.subject, body.by, at))
    await handlers.send(TOPICS.control, scope.key, raw)
    return 202, models.RememberResponse(remember_id=remember_id,
                                        fact_id=fact_id([remember_id], body.subject or "", "positive", text))


async def put_entry_text(handlers, call) -> tuple[int, models.EditTextResponse]:
    body: models.EditTextRequest = call.body
    scope, state, entries, card = handlers.scope_data(call)
    entry_id = call.params["entry_id"]
    if any(e.id == entry_id for e in card):
        raise ApiError(409, f"{entry_id!r} is a character-card entry: the card is changed with PUT …/card")
    why = refusal(state, entry_id, editing=True) if state is not None else "missing"
    if why == "missing":
        raise ApiError(404, f"no entry {entry_id!r} in this scope")
    if why is not None:
        raise ApiError(409, f"{entry_id!r} is {why}: nothing to reword there")
    text = " ".join(body.text.split())
    ok, reason = is_self_contained(text)
    if not ok:
        raise ApiError(422, f"text is not a statement a memory can keep on its own ({reason})")
    version = state.entries[entry_id].version
    raw = _checked(edit_record(scope.key, entry_id, text, body.by, state.clock or datetime.now(UTC)))
    await handlers.send(TOPICS.control, scope.key, raw)
    loop = asyncio.get_running_loop()
    end = loop.time() + handlers.credence.settings.api.feedback_wait_seconds
    while True:
        after = handlers.store.get(scope.key)
        entry = after.entries.get(entry_id) if after is not None else None
        if entry is not None and (entry.version > version or entry.text == text):
            view = reads.entry_view(entry, after.clock, handlers.tenant_memory(call))
            return 200, models.EditTextResponse(entry_id=entry_id, applied=True, entry=view, version_history=[
                models.VersionItem.model_validate(v.to_dict()) for v in entry.version_history])
        if loop.time() >= end:
            return 200, models.EditTextResponse(entry_id=entry_id, applied=False)
        await asyncio.sleep(POLL_S)
