"""The benchmark report's own logic (no benchmark runs here): targets decide "met", ratios are ours over
baseline, every registered benchmark module is found, and one call writes REPORT.md, REPORT.json and a
PNG per benchmark."""

from __future__ import annotations

import json

from benchmarks.__main__ import discover, runner_for
from benchmarks.report import Row, write


def test_targets_and_ratios():
    assert Row("b", "calls per fact", 0.15, 2.0, target="<= 0.2").met is True
    assert Row("b", "calls per fact", 0.25, target="<= 0.2").met is False
    assert Row("b", "static share", 0.72, target=">= 70%").met is True
    assert Row("b", "within budget", 0.99, target=">= 100%").met is False
    row = Row("b", "turns/s", 50.0, 1000.0, target="ratio >= 0.05")
    assert row.ratio == 0.05 and row.met is True
    assert Row("b", "x", 1.0).met is None and Row("b", "x", 1.0, 0.0).ratio is None


def test_every_benchmark_module_is_registered():
    names = discover()
    assert {"archive_funnel", "pipeline_throughput", "stage2_efficiency", "latency"} <= set(names)
    assert "report" not in names and "__main__" not in names
    for name in ("stage2_efficiency", "latency", "archive_funnel", "pipeline_throughput"):
        assert callable(runner_for(name)), name


def test_one_call_writes_the_report_and_plots(tmp_path):
    rows = [Row("latency", "p50", 120.0, 10.0, unit="ms", target="<= 1000", note="n=10"),
            Row("latency", "p99", 900.0, 30.0, unit="ms", target="<= 5000"),
            Row("Stage-2 efficiency", "calls per fact", 0.3, 4.0, target="<= 0.2")]
    report = write(rows, "test run", {"serving": "ValueError: x"}, tmp_path)
    text = report.read_text()
    assert "| latency | p50 (ms) | 10.0 | 120.0 | 12.0 | <= 1000 | yes |" in text
    assert "| **no** |" in text and "serving" in text and "n=10" in text
    assert {p.name for p in tmp_path.glob("*.png")} == {"latency.png", "Stage-2_efficiency.png"}
    assert len(json.loads((tmp_path / "REPORT.json").read_text())) == 3


def test_the_prompt_eval_rows_fail_when_the_wire_path_judges_a_case_otherwise():
    """Through the test server (the rules' own logic) the openai path must judge every case as the rules
    backend does: two swapped verdicts keep the accuracy equal (the old "ratio 1, met" row) and fail here,
    and so does a failed call on a case the rules also got wrong."""
    from benchmarks.__main__ import prompt_eval_rows

    def rows(wrong, failed=()):
        base = dict(task="stage1", cases=4, accuracy=0.5, static_prefix_share=None)
        return [base | dict(backend="rules", wrong=["a", "b"]),
                base | dict(backend="bench-model", wrong=list(wrong), failed=list(failed), static_prefix_share=0.9)]

    def met(rows_):
        return {r.metric.split(",")[0]: r.met for r in prompt_eval_rows(rows_)}

    wire = "stage1: wire and parsing"
    assert met(rows(["a", "b"])) == {"stage1: rules backend accuracy on the labelled set": None, wire: True,
                                     "stage1: static-prefix share of prompt tokens": True}
    assert met(rows(["a", "c"]))[wire] is False  # same accuracy, one verdict swapped
    assert met(rows(["a", "b"], failed=["b"]))[wire] is False  # wrong either way, but the call failed
    assert "not model quality" in next(r.note for r in prompt_eval_rows(rows(["a", "b"])) if r.metric.startswith(wire))


def test_a_merge_replaces_the_rows_measured_again_and_keeps_the_rest(tmp_path):
    from benchmarks.__main__ import Merge

    first = [Row("latency", "p50", 120.0, unit="ms"), Row("corrections", "rules: stick rate", 0.5),
             Row("serving", "p99", 3.0, unit="ms")]
    write(first, "Full run, day 1.\n\nA hand-written line.", {}, tmp_path)
    (tmp_path / "latency.png").write_bytes(b"kept as drawn")
    merge = Merge(tmp_path, ["corrections"], quick=False)
    again = [Row("corrections", "rules: stick rate", 1.0), Row("corrections", "openai: wall p50", 2.5, unit="s")]
    text = merge.write(again, {}).read_text()
    rows = json.loads((tmp_path / "REPORT.json").read_text())
    assert [(r["benchmark"], r["metric"], r["ours"]) for r in rows] == [
        ("latency", "p50", 120.0), ("corrections", "rules: stick rate", 1.0),
        ("corrections", "openai: wall p50", 2.5), ("serving", "p99", 3.0)]
    assert "Full run, day 1.\n\nA hand-written line.\n\nThe corrections rows: `python -m benchmarks --only " \
           "corrections --merge`" in text
    assert (tmp_path / "latency.png").read_bytes() == b"kept as drawn"  # only the merged benchmark redrawn
    assert "![latency](latency.png)" in text and "![corrections](corrections.png)" in text
