"""The worker's spans on the in-process path (rules backend, answered inside the batch): a turn whose
headers carry a trace context is stepped in a child span of it, its in-process LLM answer is a span under
the step, and each record the step emits is a span whose context the record's headers carry. With
tracing off, records carry no header at all."""

from __future__ import annotations

import asyncio

from credence import tracing
from credence.config.state import StateSettings
from credence.streams.runtime.agent import ScopeAgent
from credence.streams.runtime.app import Stats
from credence.streams.state.ownership import Ownership
from credence.streams.state.transaction import WorkerState
from credence.streams.state.writes import TableWrites
from tests.support import faust_double
from tests.support.faust_double import Switch
from tests.support.scope_tables import SCOPE, T0, new_tables, turn
from tests.support.tracing import in_memory_spans

from .test_inline_answers import SETTINGS, TALK, Event, Recording


class Topics(faust_double.Topics):
    keep = staticmethod(lambda sent: (sent.topic, sent.value, sent.headers))


def agent() -> tuple[ScopeAgent, Topics, int]:
    tables, writes, topics = new_tables(), TableWrites(), Topics()
    ownership = Ownership(4, SETTINGS.topic("turns"))
    state = WorkerState.over(tables, StateSettings(), ownership, writes, SETTINGS.topic)
    worker = ScopeAgent(SETTINGS, topics, state, Switch(), Stats())
    worker.runner = Recording(inline=True)
    ownership.held = {ownership.partition_of(SCOPE)}
    return worker, topics, ownership.partition_of(SCOPE)


def test_a_traced_turn_is_stepped_answered_and_emitted_in_its_trace():
    with in_memory_spans() as exporter:
        worker, topics, p = agent()
        with tracing.span("POST turns") as caller:
            headers = tracing.record_headers()
        event = Event("turns", p, 0, turn(0, TALK[0], T0))
        event.headers = headers
        asyncio.run(worker.batch([event]))
        spans = exporter.get_finished_spans()
    by_name = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    (step,) = by_name["credence.step turns"]
    assert step.context.trace_id == caller.get_span_context().trace_id
    assert step.parent.span_id == caller.get_span_context().span_id
    llm = by_name["credence.llm stage1"]
    assert llm and all(s.parent.span_id == step.context.span_id for s in llm)
    assert llm[0].attributes["credence.llm.in_process"] and llm[0].attributes["credence.llm.outcome"] == "result"
    emitted = by_name["credence.emit evidence"]
    assert emitted and all(s.parent.span_id == step.context.span_id for s in emitted)
    evidence = [h for name, _, h in topics.sent if name == "evidence"]
    assert evidence and all(h and h["traceparent"].split(b"-")[1] == f"{step.context.trace_id:032x}".encode()
                            for h in evidence)
    texts = [TALK[0]] + [v.decode() for _, v, _ in topics.sent]
    assert not [(s.name, k) for s in spans for k, v in s.attributes.items() if str(v) in texts or TALK[0] in str(v)]


def test_off_no_span_and_no_header():
    worker, topics, p = agent()
    asyncio.run(worker.batch([Event("turns", p, 0, turn(0, TALK[0], T0))]))
    assert topics.sent and all(h is None for _, _, h in topics.sent)


def test_a_forwarded_copy_keeps_the_records_trace():
    with in_memory_spans():
        worker, topics, home = agent()
        worker.state.ownership.held = set(range(4))
        with tracing.span("produced") as producer:
            headers = tracing.record_headers()
        event = Event("turns", (home + 1) % 4, 0, turn(0, TALK[0], T0))  # on a partition not its scope's
        event.headers = headers
        asyncio.run(worker.batch([event]))
    (forwarded,) = [h for name, _, h in topics.sent if name == "turns"]
    assert forwarded["traceparent"] == headers["traceparent"] and "credence-forwarded-from" in forwarded
    assert producer.get_span_context().is_valid
