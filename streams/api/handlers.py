"""The /v1 handlers. Writes (turns, feedback, cards, forget) go through topics so the stream applies them
in order; reads come from the scope store of the scope's owner. Nothing of a refused request is produced."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from credence import api_models as models
from credence import tracing
from credence.errors import ApiError, RecordError
from credence.records.control import forget_record
from credence.records.feedback import decode_feedback
from credence.records.topics import TOPICS, TopicSpec
from credence.records.turn import decode_turn
from credence.streams.api import consistency, entry_ops, memory_ops, reads, recent, turn_waits
from credence.streams.api.cards import Card, card_key, check_card_entries
from credence.streams.api.openapi import document
from credence.streams.api.tenants import Tenant
from credence.streams.runtime.topics import end_offsets
from credence.tables.clock import format_instant
from credence.tables.scope import Scope, user_prefix
from credence.tables.tokens import default_token_counter

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

log = logging.getLogger(__name__)

PROMPT_CACHE = 1024  # rendered prompts kept per worker (least recently used dropped first)
POLL_S = 0.05  # how often a bounded wait re-reads this worker's own store (memory, no Kafka)


@dataclass
class Call:
    tenant: Tenant | None
    params: dict[str, str]
    body: object
    query: object
    authorization: str = ""  # the caller's, for a wait this worker forwards to a scope's owner

    @property
    def scope(self) -> Scope:
        return Scope(self.params["tenant"], self.params["user"], self.params["character"])


class Handlers:
    def __init__(self, credence: Credence, directory, bootstrap: str, router=None) -> None:
        self.credence = credence
        self.router = router  # the scopes' owners: POST …/turns?wait= asks each turn's
        self.directory = directory
        self.bootstrap = bootstrap  # the journal's readers (the bridge's nominate route, history) ask it
        self.store = credence.store
        self.count_tokens = default_token_counter()
        self._prompts: OrderedDict[tuple, object] = OrderedDict()

    # -- the surface the route modules share (entry_ops, memory_ops, recent: they take the Handlers) ---

    def tenant_memory(self, call: Call):
        return reads.tenant_memory(self.credence.settings.memory, call.tenant)

    def scope_data(self, call: Call):
        scope = call.scope
        state = self.store.get(scope.key)
        entries = list(state.entries.values()) if state else []
        card = self.directory.card(scope.tenant, scope.character)
        return scope, state, entries, card.scope_entries(scope) if card else []

    async def send(self, topic: TopicSpec, key: str, value: bytes, partition: int | None = None):
        try:
            fut = await getattr(self.credence.topics, topic.attribute).send(key=key.encode(), value=value, partition=partition,
                                                                  headers=tracing.record_headers())
            return await fut
        except Exception as exc:  # noqa: BLE001 - any producer failure: nothing was acknowledged
            raise ApiError(503, f"could not write to the {topic.name} topic ({type(exc).__name__}); retry") from None

    async def send_soon(self, topic: TopicSpec, key: str, value: bytes) -> None:
        """Queue a record without waiting for the broker's acknowledgement: the recall route answers in
        about a millisecond instead of a produce round trip. What this can lose is a reinforcement (a
        recall hit whose usage record the broker then refuses, or a worker killed within the producer's
        linger), never a memory; a refused record is logged and counted."""
        try:
            fut = await getattr(self.credence.topics, topic.attribute).send(key=key.encode(), value=value,
                                                                  headers=tracing.record_headers())
        except Exception as exc:  # noqa: BLE001 - the answer stands; the hit is not reinforced
            self._unsent(topic.name, exc)
            return
        fut.add_done_callback(lambda done: done.cancelled() or done.exception() is None
                              or self._unsent(topic.name, done.exception()))

    def _unsent(self, topic: str, exc: BaseException) -> None:
        self.credence.stats.unsent[topic] = self.credence.stats.unsent.get(topic, 0) + 1
        log.warning("a %s record was not written (%s: %s)", topic, type(exc).__name__, exc)

    # -- routes ----------------------------------------------------------------------------------

    async def post_turns(self, call: Call):
        body: models.TurnsRequest = call.body
        limit = self.credence.settings.api.max_turns_per_request
        if len(body.turns) > limit:
            raise ApiError(422, f"at most {limit} turns per request (produce to Kafka for bulk)")
        wait = consistency.wait_of(call.query, self.credence.settings.api.turn_wait_max_seconds, token_needed=False)
        tenant, accepted, rejected = call.tenant.name, [], []
        for i, raw in enumerate(body.turns):
            if "tenant" in raw and raw["tenant"] != tenant:
                rejected.append(models.Rejected(index=i, reason="'tenant' comes from the path; leave it out"))
                continue
            try:
                turn = decode_turn(json.dumps({"v": 1, **raw, "tenant": tenant}).encode())
            except (RecordError, TypeError, ValueError) as exc:
                rejected.append(models.Rejected(index=i, reason=str(exc)))
                continue
            accepted.append(turn)
        if wait is not None:
            turn_waits.wait_scopes(accepted)
        futures = []
        try:
            headers = tracing.record_headers()  # each turn's step continues the request's trace
            for turn in accepted:
                futures.append(await self.credence.topics.turns.send(value=turn.encode(), key=turn.scope.encode(),
                                                                     headers=headers))
            written = await asyncio.gather(*futures)
        except Exception as exc:  # noqa: BLE001
            raise ApiError(503, f"could not write turns ({type(exc).__name__}); retry, turn ids make it safe") from None
        positions, token = [], {}
        for turn, meta in zip(accepted, written, strict=True):
            positions.append(models.TurnPosition(turn_id=turn.turn_id, user=turn.user, character=turn.character,
                                                 partition=meta.partition, offset=meta.offset))
            consistency.merged(token, meta.partition, meta.offset)
        reached = await turn_waits.wait_turns(self, call, wait, positions) if wait and positions else None
        return 202, models.TurnsResponse(accepted=len(accepted), rejected=rejected, turns=positions,
                                         token=consistency.encode(token) if token else None, reached=reached)

    async def get_turn(self, call: Call):
        return await turn_waits.get_turn(self, call)

    async def get_prompt(self, call: Call):
        await turn_waits.before_read(self, call)
        stamp = self._stamp(call)
        cached = self._prompts.get(stamp) if stamp else None
        if cached is not None:
            self._prompts.move_to_end(stamp)
            return 200, cached
        scope, state, entries, card = self.scope_data(call)
        now = reads.read_instant(call.query, state.clock if state else None)
        entries, now = await self._as_of(call, scope, entries, now)
        # Rendering a large scope takes milliseconds of CPU: off the event loop, so the worker's Kafka
        # heartbeats and other requests are not held up behind it.
        result = await asyncio.to_thread(reads.prompt, scope, entries, card, now, self.tenant_memory(call),
                                         self.count_tokens)
        if "at" not in call.query and "as_of" not in call.query:  # a read of the past is not a use
            await memory_ops.record_prompt(self, scope, result, entries, now)  # a rendered entry counts as used
        if stamp:
            self._prompts[stamp] = result
            while len(self._prompts) > PROMPT_CACHE:
                self._prompts.popitem(last=False)
        return 200, result

    def _stamp(self, call: Call) -> tuple | None:
        """What a scope's prompt depends on: entries version, clock, card, the tenant's settings and `at`.
        None when the store cannot say its version cheaply, or for an `as_of` read (then it renders)."""
        control = getattr(self.store, "control", None)
        if control is None or not hasattr(self.store, "version") or "as_of" in call.query:
            return None
        scope = call.scope
        state = control(scope.key)
        card = self.directory.card(scope.tenant, scope.character)
        return (scope.key, self.store.version(scope.key), state.clock if state else None,
                card.updated_at if card else None, call.tenant.settings, call.query.get("at"))

    async def get_entries(self, call: Call):
        await turn_waits.before_read(self, call)
        scope, state, entries, card = self.scope_data(call)
        now = reads.read_instant(call.query, state.clock if state else None)
        entries, now = await self._as_of(call, scope, entries, now)
        return 200, await asyncio.to_thread(reads.entries, entries, card, now, self.tenant_memory(call), call.query)

    async def get_entry(self, call: Call):
        scope, state, entries, card = self.scope_data(call)
        now = reads.read_instant(call.query, state.clock if state else None)
        found = {e.id: e for e in [*card, *entries]}.get(call.params["entry_id"])
        if found is None:
            raise ApiError(404, f"no entry {call.params['entry_id']!r} in this scope")
        history = [] if found.protected else self.store.history(scope.key, found.id)
        return 200, models.EntryDetail(entry=reads.entry_view(found, now, self.tenant_memory(call)),
                                       history=[models.HistoryEvent.model_validate(h) for h in history], clock=now,
                                       version_history=[models.VersionItem.model_validate(v.to_dict())
                                                        for v in found.version_history])

    async def _as_of(self, call: Call, scope, entries, now):
        """Bi-temporal read: ?as_of=T answers with what was valid at T (from the journal), read at T."""
        if "as_of" not in call.query:
            return entries, now
        at = reads.read_instant({"at": call.query["as_of"]}, None)
        return await memory_ops.entries_as_of(self, scope, at), at

    async def post_feedback(self, call: Call):
        body: models.FeedbackRequest = call.body
        wait = _flag(call.query, "wait")
        scope, state, entries, card = self.scope_data(call)
        if any(e.id == body.entry_id for e in card):
            raise ApiError(409, f"{body.entry_id!r} is a character-card entry: protected, signals never touch it")
        if state is None or body.entry_id not in state.entries:
            raise ApiError(404, f"no entry {body.entry_id!r} in this scope")
        if body.ts is not None and body.ts.tzinfo is None:
            raise ApiError(422, "ts needs a UTC offset (e.g. 2026-01-01T12:00:00Z)")
        feedback_id = uuid.uuid4().hex
        record = {"v": 1, **scope.fields(), "feedback_id": feedback_id, "entry_id": body.entry_id,
                  "decision": body.kind, "ts": format_instant(body.ts or datetime.now(UTC))}
        raw = json.dumps(record, separators=(",", ":")).encode()
        decode_feedback(raw)  # the topic's own decoder: what the stream will accept
        meta = await self.send(TOPICS.feedback, scope.key, raw)
        if not wait:
            return 202, models.FeedbackResponse(feedback_id=feedback_id)
        applied = await self._wait_applied(scope.key, feedback_id, meta.partition, meta.offset)
        after = self.store.get(scope.key)
        entry = after.entries.get(body.entry_id) if after else None
        if entry is not None and entry.merged_into_id in after.entries:
            entry = after.entries[entry.merged_into_id]  # feedback on a promoted reflection lands on its persona
        view = reads.entry_view(entry, after.clock, self.tenant_memory(call)) if entry is not None and applied else None
        return 202, models.FeedbackResponse(feedback_id=feedback_id, applied=applied, entry=view)

    async def _wait_applied(self, scope: str, feedback_id: str, partition: int, offset: int) -> bool:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.credence.settings.api.feedback_wait_seconds
        while loop.time() < end:
            if self.store.feedback_applied(scope, feedback_id, partition, offset):
                return True
            await asyncio.sleep(POLL_S)
        return False

    async def post_recall(self, call: Call):
        from credence.streams.api.recall_ops import recall  # optional: needs the recall service

        await turn_waits.before_read(self, call)
        scope, state, entries, card = self.scope_data(call)
        now = state.clock if state and state.clock else datetime.now(UTC)
        version = self.store.version(scope.key) if hasattr(self.store, "version") else None
        entries = memory_ops.recallable(entries)
        tag = reads.tag_of(call.body.tag, 422)
        if tag is not None:  # a tenant tag: the tagged entries only (card entries carry none), indexed as their own set
            entries, card, version = [e for e in entries if tag in e.tags], [], None
        response = await recall(self, scope, version, [*card, *entries], now, call.body, self.tenant_memory(call))
        await memory_ops.record_recall(self, scope, response, entries, now)  # usage strength: hits reinforce
        return 200, response

    async def post_restore(self, call: Call):
        return await memory_ops.restore(self, call)

    async def put_consensus(self, call: Call):
        return await memory_ops.consensus(self, call)

    async def post_nominate(self, call: Call):
        return await memory_ops.nominate(self, call)

    async def delete_entry(self, call: Call):
        return await entry_ops.delete_entry(self, call)

    async def put_entry_text(self, call: Call):
        return await entry_ops.put_entry_text(self, call)

    async def post_entries(self, call: Call):
        return await entry_ops.post_entries(self, call)

    async def put_card(self, call: Call):
        body: models.CardRequest = call.body
        try:
            entries = check_card_entries([e.model_dump() for e in body.entries])
        except RecordError as exc:
            raise ApiError(422, str(exc)) from None
        card = Card(tenant=call.tenant.name, character=call.params["character"], entries=entries,
                    updated_at=datetime.now(UTC))
        await self.send(TOPICS.cards, card_key(card.tenant, card.character), card.encode())
        await self._wait_card(card)
        return 200, models.CardResponse(tenant=card.tenant, character=card.character, entries=len(entries))

    async def _wait_card(self, card: Card) -> None:
        """Read-your-write on this worker: return once its own directory holds the new card."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.credence.settings.api.feedback_wait_seconds
        while loop.time() < end and self.directory.card(card.tenant, card.character) != card:
            await asyncio.sleep(POLL_S)

    async def delete_user(self, call: Call):
        tenant, user = call.tenant.name, call.params["user"]
        settings = self.credence.settings
        partitions = settings.topic_partitions
        try:  # ordered after the user's records already queued (streams/state/forgets.py)
            after = await end_offsets(self.bootstrap, settings, list(range(partitions)))
        except Exception as exc:  # noqa: BLE001 - nothing was sent: the caller retries
            raise ApiError(503, f"could not read the input topics' end offsets ({type(exc).__name__}); retry") from None
        raw = forget_record(tenant, user, after)
        for partition in range(partitions):  # a user's scopes (one per character) live on many partitions
            await self.send(TOPICS.control, user_prefix(tenant, user), raw, partition=partition)
        return 202, models.ForgetResponse(tenant=tenant, user=user, partitions=partitions)

    async def get_recent(self, call: Call):
        return await recent.recent(self, call)

    async def get_openapi(self, call: Call):
        return 200, document()


def _flag(query, name: str) -> bool:
    value = query.get(name, "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise ApiError(400, f"query parameter {name!r} must be true or false, got {value[:20]!r}")
    return value in ("true", "1")
