"""The worker's spans: its step on each record (a child of the trace the record's headers carry) and each
record a step emits (a child of that step, its context in the record's headers). Attributes name the
record's place, kind and tenant, never its key or text."""

from __future__ import annotations

import re
from collections.abc import Mapping

from credence import tracing


def step_span(event, item):
    """The span of the worker's step on one record: a child of the trace its headers carry (a new trace
    when they carry none). Only the record's place, kind and tenant: never its key or text."""
    msg = event.message
    return tracing.span(f"credence.step {item.name}", tracing.CONSUMER, tracing.context_of(getattr(event, "headers", None)), {
        "messaging.system": "kafka", "messaging.operation.type": "process",
        "messaging.destination.name": msg.topic, "messaging.destination.partition.id": str(msg.partition),
        "messaging.kafka.offset": msg.offset, "credence.record.kind": item.kind,
        "credence.tenant": item.tenant})


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
    name = getattr(topic, "get_topic_name", lambda: made.topic.name)()
    return tracing.span(f"credence.emit {made.topic.name}", tracing.PRODUCER, context, {
        "messaging.system": "kafka", "messaging.operation.type": "send", "messaging.destination.name": name,
        "credence.event": str(made.record.get("event") or made.record.get("type") or "")})


# W3C Trace Context (https://www.w3.org/TR/trace-context/): traceparent's four fields (a later version may
# add more, after a dash), tracestate's list members.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[ -~]*)?")
_MEMBER = re.compile(r"([a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})"
                     r"=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
MAX_TRACESTATE_MEMBERS, MAX_TRACESTATE_BYTES = 32, 512


def traceparent(raw) -> bytes | None:
    """A valid traceparent header re-encoded (version 00, its four fields), None for anything else."""
    if raw is None or len(raw) > MAX_TRACESTATE_BYTES:
        return None
    try:
        found = _TRACEPARENT.fullmatch(raw.decode("ascii"))
    except (AttributeError, UnicodeDecodeError):
        return None
    if found is None:
        return None
    version, trace_id, parent_id, flags, rest = found.groups()
    if version == "ff" or (version == "00" and rest) or not int(trace_id, 16) or not int(parent_id, 16):
        return None
    return f"00-{trace_id}-{parent_id}-{flags}".encode()


def tracestate(raw) -> bytes | None:
    """A valid tracestate header re-encoded (its list members, blanks dropped), None for anything else:
    the specification forbids passing on a tracestate that could not be parsed."""
    if raw is None or len(raw) > 4 * MAX_TRACESTATE_BYTES:  # blanks aside, longer is over the limit
        return None
    try:
        text = raw.decode("ascii")
    except (AttributeError, UnicodeDecodeError):
        return None
    members = [m.strip(" \t") for m in text.split(",")]
    members = [m for m in members if m]
    keys = [m.split("=", 1)[0] for m in members]
    if (not members or len(members) > MAX_TRACESTATE_MEMBERS or len(set(keys)) != len(keys)
            or not all(_MEMBER.fullmatch(m) for m in members)):
        return None
    encoded = ",".join(members).encode()
    return encoded if len(encoded) <= MAX_TRACESTATE_BYTES else None


def carried(event) -> dict | None:
    """The trace context of an input record, parsed and encoded anew for its forwarded copy: never the
    producer's bytes (a header of any size or content would be copied into a record credence sends).
    None when tracing is off or the record carries no valid traceparent (a tracestate alone names no
    trace)."""
    headers = getattr(event, "headers", None)
    if not headers or not tracing.active():
        return None
    headers = headers if isinstance(headers, Mapping) else dict(headers)  # Kafka's (name, value) pairs
    parent = traceparent(headers.get("traceparent"))
    if parent is None:
        return None
    state = tracestate(headers.get("tracestate"))
    return {"traceparent": parent} | ({"tracestate": state} if state is not None else {})


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
