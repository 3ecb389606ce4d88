"""OpenTelemetry traces that follow a turn through Kafka: W3C trace context in record headers.

A turn produced by the API, the MCP tool or `credence replay` starts a trace (or continues the caller's
`traceparent`); the worker's step, each LLM call and each emitted record are spans of it. Off unless the
standard `OTEL_*` variables ask for export (`setup`); off, every helper checks `active` first and does
nothing. Span attributes never name a key, a text, a prompt or a scope's user.

The spans, their attributes and the cost: docs/operations/observability.md ("Tracing").
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from credence.errors import ConfigError

log = logging.getLogger(__name__)

TRACER = "credence"
_PROPAGATOR = TraceContextTextMapPropagator()
_OFF = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL = (SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER,
                                                SpanKind.CONSUMER, SpanKind.INTERNAL)


def active() -> bool:
    """A real tracer provider is installed (else every span would be a no-op). Called on every record:
    the API's public getter reads the environment each time (~1 µs), so the global it sets once is read
    directly where the API has it."""
    if _PROVIDER_GLOBAL:
        provider = trace._TRACER_PROVIDER  # None until set_tracer_provider: the no-op proxy
        return provider is not None and not isinstance(provider, _OFF)
    return not isinstance(trace.get_tracer_provider(), _OFF)


_PROVIDER_GLOBAL = hasattr(trace, "_TRACER_PROVIDER")


# -- turning it on ------------------------------------------------------------------------------------

def export_requested(env: Mapping[str, str] = os.environ) -> bool:
    """The standard variables ask for traces: an exporter other than `none`, or an OTLP endpoint, and the
    SDK not disabled. Unlike the SDK's own default (`otlp`), nothing set means off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def setup(service: str, env: Mapping[str, str] = os.environ) -> bool:
    """Install the SDK's tracer provider when the environment asks for export; returns whether it did.
    `service` is the default service name (OTEL_SERVICE_NAME wins)."""
    if active() or not export_requested(env):
        return active()
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError("OTEL_* variables ask for traces but the OpenTelemetry SDK is not installed: "
                          "pip install -e '.[tracing]' (from the checkout), or unset OTEL_TRACES_EXPORTER and "
                          "OTEL_EXPORTER_OTLP_ENDPOINT") from None
    provider = TracerProvider(resource=Resource.create({"service.name": service}).merge(Resource.create()))
    for name in [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, env)))
    trace.set_tracer_provider(provider)
    log.info("tracing on: spans exported (%s)", env.get("OTEL_TRACES_EXPORTER", "otlp"))
    return True


def _exporter(name: str, env: Mapping[str, str]):
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    if name != "otlp" or protocol != "http/protobuf":
        raise ConfigError(f"OTEL_TRACES_EXPORTER={name!r} with protocol {protocol!r} is not supported: credence "
                          "exports OTLP over HTTP (otlp, http/protobuf) or to the console (console)")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


# -- context in Kafka record headers ------------------------------------------------------------------

def record_headers(headers: dict[str, bytes] | None = None) -> dict[str, bytes] | None:
    """`headers` plus the current span's context (`traceparent`, `tracestate`), for a record about to be
    produced; unchanged when tracing is off or no span is current."""
    if not active() or not trace.get_current_span().get_span_context().is_valid:
        return headers
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return (headers or {}) | {k: v.encode() for k, v in carrier.items()}


def aiokafka_headers(headers: dict[str, bytes] | None = None) -> list[tuple[str, bytes]] | None:
    """`record_headers` as aiokafka's producer takes them (a list of pairs)."""
    out = record_headers(headers)
    return list(out.items()) if out else None


def context_of(headers) -> otel_context.Context | None:
    """The trace context a record's headers carry (a mapping or Kafka's (name, bytes) pairs); None when
    tracing is off or they carry none."""
    if not headers or not active():
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    carrier = {}
    for name, value in pairs:
        if name in ("traceparent", "tracestate") and value is not None:
            try:
                carrier[name] = value.decode() if isinstance(value, bytes) else str(value)
            except UnicodeDecodeError:
                return None
    if "traceparent" not in carrier:
        return None
    found = _PROPAGATOR.extract(carrier)
    return found if trace.get_current_span(found).get_span_context().is_valid else None


def http_context(headers: Mapping[str, str]) -> otel_context.Context | None:
    """A caller's `traceparent` HTTP header (None when tracing is off or there is none)."""
    if not active() or "traceparent" not in headers:
        return None
    return _PROPAGATOR.extract({k: headers[k] for k in ("traceparent", "tracestate") if k in headers})


def http_headers(headers: dict[str, str]) -> dict[str, str]:
    """`headers` plus the current span's `traceparent`, for an HTTP request this process makes."""
    if not active() or not trace.get_current_span().get_span_context().is_valid:
        return headers
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return headers | carrier


# -- spans ----------------------------------------------------------------------------------------

def span(name: str, kind: SpanKind = INTERNAL, parent: otel_context.Context | None = None,
         attributes: dict[str, Any] | None = None):
    """A current span (child of `parent` if given, else of the current one); a null context yielding None
    when tracing is off."""
    if not active():
        return nullcontext()
    # an exception's message may quote a record's text: only its type is kept (`failed`)
    return trace.get_tracer(TRACER).start_as_current_span(name, context=parent, kind=kind, attributes=attributes,
                                                          record_exception=False)


def current() -> otel_context.Context | None:
    """The current context, to hand to work that runs later (None when tracing is off)."""
    return otel_context.get_current() if active() else None


@contextmanager
def attached(ctx: otel_context.Context | None) -> Iterator[None]:
    """Make `ctx` current inside (nothing when None)."""
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def failed(current_span, exc: BaseException) -> None:
    """Mark a span failed with the error's type (its message may quote user text: not recorded)."""
    if current_span is not None:
        current_span.set_attribute("error.type", type(exc).__name__)
        current_span.set_status(Status(StatusCode.ERROR))
