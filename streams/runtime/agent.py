"""The scope agent: the one owner of every scope on its partitions.

It reads turns, feedback, usage, facts and control records (all keyed by scope, co-partitioned), loads the
scope's state, runs one pure step, saves the state, sends the step's records and hands its LLM requests
to the runner. Delivery is at-least-once, and a step's records (journal, archive hand-off) are
acknowledged by the broker before the scope's new state is written: a crash in between re-runs the step
(its records come again, with the same ids, and downstream keeps the first), while a state that was
written always has its records behind it — an archived entry is never in neither place. A redelivered
record whose offset the scope already applied is skipped.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timezone

from aiokafka.partitioner import DefaultPartitioner

from credence.errors import RecordError
from credence.deadletter import dead_letter
from credence.streams.runtime.records import Turn, decode_control, decode_feedback, decode_turn, decode_usage
from credence.streams.scope.context import StepContext
from credence.streams.scope.state import ScopeState
from credence.streams.scope.step import event_now, step
from credence.tables.clock import parse_instant

log = logging.getLogger(__name__)
SEP = "\x1f"  # cannot appear in a validated scope part


def _encode(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


def _same_but_position(stored: dict | None, after: dict) -> bool:
    if stored is None:
        return False
    return {k: v for k, v in stored.items() if k != "applied"} == {k: v for k, v in after.items() if k != "applied"}


def register(credence) -> None:
    app, topics, tables, stats, settings = (credence.app, credence.topics, credence.tables, credence.stats,
                                            credence.settings)
    seen, scopes = tables["seen"], tables["scopes"]
    boot = uuid.uuid4().hex[:12]
    by_name = {settings.topic(n): n for n in ("turns", "feedback", "facts", "control", "usage")}

    async def send(topic: str, scope: str, record: dict) -> None:
        fut = await getattr(topics, topic).send(key=scope.encode(), value=_encode(record))
        await fut  # acknowledged before the input's offset can be committed

    async def send_all(scope: str, emits) -> None:
        """Queue all of a step's records, then wait for every acknowledgement together."""
        futures = [await getattr(topics, e.topic).send(key=scope.encode(), value=_encode(e.record)) for e in emits]
        for fut in futures:
            await fut

    credence.send = send

    async def reject(event, reason: str) -> None:
        msg = event.message
        stats.turns_rejected += msg.topic == settings.topic("turns")
        stats.records_rejected += 1
        log.warning("record rejected (%s[%d]@%d): %s", msg.topic, msg.partition, msg.offset, reason)
        await topics.dlq.send(key=event.key, value=dead_letter(
            topic=msg.topic, partition=msg.partition, offset=msg.offset, reason=reason,
            original=event.value, at=datetime.now(timezone.utc)))

    def decode(name: str, raw: bytes) -> tuple[str, str, dict, datetime | None]:
        """(scope, kind, record, event time) of one input record."""
        if name == "turns":
            turn: Turn = decode_turn(raw)
            return turn.scope, "turn", turn.to_dict(), turn.ts
        if name == "feedback":
            fb = decode_feedback(raw)
            return f"{fb['tenant']}/{fb['user']}/{fb['character']}", "feedback", fb, parse_instant(fb["ts"])
        if name == "usage":
            hit = decode_usage(raw)
            return f"{hit['tenant']}/{hit['user']}/{hit['character']}", "usage", hit, parse_instant(hit["ts"])
        ctl = decode_control(raw)
        if ctl["type"] == "forget":
            return f"{ctl['tenant']}/{ctl['user']}/", "forget", ctl, None
        at = parse_instant(ctl.get("now") if ctl["type"] == "tick" else ctl.get("ts"))
        return f"{ctl['tenant']}/{ctl['user']}/{ctl['character']}", ctl["type"], ctl, at

    def first_time(name: str, scope: str, record: dict, position: str) -> bool:
        """Exact duplicates (same turn_id / feedback_id in a scope) are dropped, once and for all. The
        mark holds the record's own position, so the record itself redelivered after a crash that
        saved the mark but not the scope is still applied."""
        if name not in ("turns", "feedback"):
            return True
        ident = record.get("turn_id") or record.get("feedback_id")
        key = f"{name}{SEP}{scope}{SEP}{ident}"
        mark = seen.get(key)
        if mark and mark != position:
            stats.turns_duplicate += name == "turns"
            return False
        seen[key] = position
        return True

    partitioner = DefaultPartitioner()
    all_partitions = list(range(settings.topic_partitions))

    def owned_by(scope: str, partition: int) -> bool:
        return partitioner(scope.encode(), all_partitions, all_partitions) == partition

    def forget_user(prefix: str, partition: int) -> None:
        """Right to be forgotten: delete the user's scopes and duplicate marks from the tables. Each key is
        deleted while processing its own partition's copy of the request, so the tombstone lands in the
        changelog partition that holds the key (a compacted topic: the data is gone after compaction)."""
        doomed = [k for k in list(scopes.keys()) if k.startswith(prefix) and owned_by(k, partition)]
        marks = [k for k in list(seen.keys())
                 if k.split(SEP)[1].startswith(prefix) and owned_by(k.split(SEP)[1], partition)]
        for key in doomed:
            del scopes[key]
            credence.busy.discard(key)
        for key in marks:
            del seen[key]
        stats.forgotten_scopes += len(doomed)
        log.info("forgot %s on partition %d: %d scopes, %d duplicate marks", prefix, partition,
                 len(doomed), len(marks))

    def context(state: ScopeState, now: datetime) -> StepContext:
        tenant = state.scope.split("/")[0]
        return StepContext(now=now, powerful=credence.switch.enabled(tenant), boot=boot,
                           memory=settings.memory, pipeline=settings.pipeline, usage=settings.usage)

    @app.agent(app.topic(*by_name, key_type=bytes, value_type=bytes, key_serializer="raw",
                         value_serializer="raw"), name="scopes")
    async def scope_agent(stream):
        async for event in stream.events():
            msg = event.message
            name = by_name[msg.topic]
            try:
                scope, kind, record, at = decode(name, event.value)
            except RecordError as exc:
                await reject(event, str(exc))
                continue
            if kind == "forget":
                forget_user(scope, msg.partition)
                continue
            if event.key != scope.encode():
                # Re-key through the same topic so the record lands on its scope's partition; the copy is
                # applied there, and duplicate detection absorbs a forward repeated after a crash.
                await getattr(topics, name).send(key=scope.encode(), value=event.value)
                stats.turns_rekeyed += name == "turns"
                continue
            stored = scopes.get(scope)
            state = ScopeState.from_dict(stored) if stored else ScopeState(scope=scope)
            position = f"{name}:{msg.partition}"
            if msg.offset <= state.applied.get(position, -1):
                stats.redelivered += 1
                continue
            if not first_time(name, scope, record, f"{position}:{msg.offset}"):
                continue
            if name == "turns":
                state.turns += 1
                stats.turns_accepted += 1
            ctx = context(state, event_now(state, at) or datetime.now(timezone.utc))
            try:
                step(state, kind, record, ctx)
            except Exception as exc:  # noqa: BLE001
                # A record the domain refuses (or a bug) must not stop the partition: the scope keeps
                # its previous state, and the record goes whole to the DLQ with the reason. A result that
                # cannot be applied also releases its request, or the scope would wait for it forever.
                log.exception("step failed for %s on %s", scope, msg.topic)
                await reject(event, f"could not apply to scope {scope}: {type(exc).__name__}: {exc}")
                if kind in ("result", "failed") and stored:
                    kept = ScopeState.from_dict(stored)
                    if kept.requests.pop(record.get("request_id", ""), None) is not None:
                        kept.applied[position] = msg.offset
                        scopes[scope] = kept.to_dict()
                continue
            after = state.to_dict()
            if kind == "tick" and not ctx.emits and not ctx.requests and _same_but_position(stored, after):
                continue  # an idle tick changes nothing: no changelog write (its redelivery is harmless)
            for line in ctx.log:
                log.info("%s: %s", scope, line)
            await send_all(scope, ctx.emits)  # durable before the state that depends on them
            state.applied[position] = msg.offset
            after["applied"] = state.applied
            scopes[scope] = after
            credence.busy.discard(scope) if state.idle else credence.busy.add(scope)
            stats.journal_events += sum(1 for e in ctx.emits if e.topic == "evidence")
            stats.archived += sum(1 for e in ctx.emits if e.topic == "archive")
            for req in ctx.requests:
                credence.runner.submit(scope, req)
