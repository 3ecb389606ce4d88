"""An in-memory span exporter installed as the process's tracer provider for one test, and removed after
(the API lets a provider be set once per process; the test restores its globals)."""

from __future__ import annotations

from contextlib import contextmanager

from opentelemetry import trace


@contextmanager
def in_memory_spans():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done = provider, True
    try:
        yield exporter
    finally:
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done = saved
        provider.shutdown()
