"""Trace context in Kafka record headers: injected from the current span, read back as its parent, and
nothing at all (no header, no context) when tracing is off."""

from __future__ import annotations

from credence import tracing
from tests.support.tracing import in_memory_spans


def test_off_adds_no_header_and_reads_no_context():
    assert not tracing.active()
    assert tracing.record_headers() is None
    assert tracing.record_headers({"a": b"1"}) == {"a": b"1"}
    assert tracing.aiokafka_headers() is None
    assert tracing.context_of({"traceparent": b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"}) is None
    with tracing.span("nothing") as span:
        assert span is None


def test_a_record_carries_the_current_span_and_its_reader_continues_the_trace():
    with in_memory_spans() as exporter:
        with tracing.span("produce") as produced:
            headers = tracing.record_headers({"credence-forwarded-from": b"turns:0:1"})
        assert headers["credence-forwarded-from"] == b"turns:0:1"  # other headers kept
        ids = produced.get_span_context()
        assert headers["traceparent"].startswith(f"00-{ids.trace_id:032x}-{ids.span_id:016x}-".encode())
        as_pairs = list(headers.items())  # Kafka's form, as aiokafka hands them over
        with tracing.span("consume", tracing.CONSUMER, parent=tracing.context_of(as_pairs)):
            pass
        consumed = {s.name: s for s in exporter.get_finished_spans()}["consume"]
        assert consumed.context.trace_id == ids.trace_id
        assert consumed.parent.span_id == ids.span_id


def test_no_current_span_no_header_and_junk_is_no_context():
    with in_memory_spans():
        assert tracing.record_headers() is None
        assert tracing.context_of({"traceparent": b"not a traceparent"}) is None
        assert tracing.context_of([("traceparent", b"\xff\xfe")]) is None
        assert tracing.context_of({"other": b"x"}) is None


def test_the_callers_traceparent_http_header_is_continued():
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with in_memory_spans() as exporter:
        parent = tracing.http_context({"traceparent": f"00-{trace_id}-{span_id}-01"})
        with tracing.span("POST /v1/tenants/{tenant}/turns", tracing.SERVER, parent=parent):
            pass
        (span,) = exporter.get_finished_spans()
        assert f"{span.context.trace_id:032x}" == trace_id and f"{span.parent.span_id:016x}" == span_id


def test_export_only_when_the_standard_variables_ask():
    assert not tracing.export_requested({})
    assert not tracing.export_requested({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"})
    assert not tracing.export_requested({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing.export_requested({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing.export_requested({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not tracing.setup("credence-test", {})  # nothing asked: the no-op provider stays
    assert not tracing.active()


PARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Input:
    def __init__(self, headers) -> None:
        self.headers = headers


def test_a_forwarded_copy_carries_the_trace_context_parsed_and_encoded_anew_never_the_raw_bytes():
    from credence.streams.runtime.traces import carried

    with in_memory_spans():
        assert carried(Input({"traceparent": PARENT, "tracestate": b" rojo=00f067aa0ba902b7 ,, congo=t61"})) == {
            "traceparent": PARENT, "tracestate": b"rojo=00f067aa0ba902b7,congo=t61"}
        later_version = b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next"
        assert carried(Input([("traceparent", later_version)])) == {"traceparent": PARENT}  # Kafka's pairs
        for junk in (b"x" * 1_000_000, PARENT + b"-more", b"ff" + PARENT[2:], PARENT.upper(),
                     b"00-" + b"0" * 32 + PARENT[35:], PARENT[:-3] + b"-\xff"):
            assert carried(Input({"traceparent": junk, "tracestate": b"a=1"})) is None, junk
        for junk in (b"a=1,a=2", b"Upper=1", b"a=" + b"v" * 300, b"a=1," * 40, b"a=\x00", b"k" * 1_000_000):
            assert carried(Input({"traceparent": PARENT, "tracestate": junk})) == {"traceparent": PARENT}, junk
    assert carried(Input({"traceparent": PARENT})) is None  # tracing off: nothing carried
