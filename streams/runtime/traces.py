"""The worker's spans: its step on each record (a child of the trace the record's headers carry) and each
record a step emits (a child of that step, its context in the record's headers). Attributes name the
record's place, kind and tenant, never its key or text."""

from __future__ import annotations

from credence import tracing
from credence.tables.scope import tenant_of


def step_span(event, item):
    """The span of the worker's step on one record: a child of the trace its headers carry (a new trace
    when they carry none). Only the record's place, kind and tenant: never its key or text."""
    msg = event.message
    return tracing.span(f"credence.step {item.name}", tracing.CONSUMER, tracing.context_of(getattr(event, "headers", None)), {
        "messaging.system": "kafka", "messaging.operation.type": "process",
        "messaging.destination.name": msg.topic, "messaging.destination.partition.id": str(msg.partition),
        "messaging.kafka.offset": msg.offset, "credence.record.kind": item.kind,
        "credence.tenant": tenant_of(item.scope)})


def traced(scope_work, emitted: int, context) -> None:
    """Remember the step's trace context for what it made: the emits after the first `emitted`, and its
    requests (sent to the runner after the batch)."""
    if scope_work is None or context is None:
        return
    for made in scope_work.emits[emitted:]:
        scope_work.traced[id(made)] = context
    for req in scope_work.requests:
        scope_work.traced.setdefault(id(req), context)


def emit_span(topic, made, context):
    """The span of one record a step emitted (`made`: an Emit), in the trace of the step (`context`)."""
    name = getattr(topic, "get_topic_name", lambda: made.topic)()
    return tracing.span(f"credence.emit {made.topic}", tracing.PRODUCER, context, {
        "messaging.system": "kafka", "messaging.operation.type": "send", "messaging.destination.name": name,
        "credence.event": str(made.record.get("event") or made.record.get("type") or "")})


def carried(event) -> dict | None:
    """The trace context headers of an input record, for its forwarded copy (None when tracing is off)."""
    headers = getattr(event, "headers", None)
    if not headers or not tracing.active():
        return None
    return {k: v for k, v in headers.items() if k in ("traceparent", "tracestate")}


async def stepped(step, work: dict, event, item) -> None:
    """Await `step` (the agent's step on `event`); with tracing on, in the record's step span, and what the
    step made (emits, requests) remembers that span's context."""
    if not tracing.active():
        return await step
    with step_span(event, item):
        emitted = len(work[item.scope].emits)
        await step
        traced(work.get(item.scope), emitted, tracing.current())


def emit(writes, partition: int, topic, key: bytes, value: bytes, made, context) -> None:
    """Hand one record a step emitted (`made`) to the batch's writes (`partition`: its scope's); with its
    step's trace context, in a span of its own whose context the record's headers carry (the journal event
    of a turn is a span of the turn's trace)."""
    if context is None:
        return writes.emit(partition, topic, key, value)
    with emit_span(topic, made, context):
        return writes.emit(partition, topic, key, value)
