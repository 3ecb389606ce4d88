"""`python -m benchmarks [--quick] [--only NAME,…]`: every benchmark in this folder, one report.

Starts one embedded Kafka broker (or uses CREDENCE_KAFKA_BOOTSTRAP), runs each registered benchmark,
and writes benchmarks/results/REPORT.md (+ REPORT.json and one PNG per benchmark). Each row is
baseline, ours, ratio and target, measured in the same run.

A benchmark plugs in by defining, in its own benchmarks/<name>.py,
    report_rows(quick: bool, bootstrap: str, work: pathlib.Path) -> list[benchmarks.report.Row]
Any such module is found by itself; the two older scripts below are adapted here. A module that
exists but has no report_rows is listed under "did not run" with how to run it alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests.support (the OpenAI-compatible test server, pipeline helpers)

from benchmarks.report import Row, committed, kafka_and_folder, merged, write  # noqa: E402

# Run first to last; modules found later (with report_rows) run after these.
ORDER = ("throughput", "pipeline_throughput", "stage2_efficiency", "latency", "serving", "api_prompt",
         "prompt_eval", "corrections", "corrections_wall", "archive_funnel")
NOT_BENCHMARKS = {"__main__", "__init__", "report", "state_costs", "throughput_report"}  # parts of throughput


def _archive_funnel(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    module = importlib.import_module("benchmarks.archive_funnel")
    rows = "50000" if quick else "2000000"
    spans = "5000,50000" if quick else "10000,100000,1000000"
    out = []
    for r in module.main(["--rows", rows, "--spans", spans, "--runs", "1" if quick else "3",
                          "--root", str(work / "funnel")]):
        out.append(Row("archive funnel", f"funnel() time, {int(rows):,} rows, span {r['span']:,}", r["ours_s"] * 1000,
                       r["hand_s"] * 1000, unit="ms", baseline_label="hand-written DuckDB GROUP BY",
                       target="ratio <= 1.25"))
    return out


def _pipeline_throughput(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    from credence.config.llm import LLMSettings
    from tests.support.openai_server import OpenAICompatibleServer

    module = importlib.import_module("benchmarks.pipeline_throughput")
    sample = HERE.parent / "streams" / "ops" / "data" / "sample_turns.jsonl"
    lines = [line for line in sample.read_bytes().splitlines() if line.strip()]
    with OpenAICompatibleServer(model="bench-model") as server:
        openai = LLMSettings(backend="openai", base_url=server.base_url, model="bench-model", timeout_s=10.0)
        rules = module.run_once(bootstrap, lines, work, LLMSettings())
        ours = module.run_once(bootstrap, lines, work, openai)
    rate = lambda r: r["turns"] / r["seconds"]  # noqa: E731
    return [Row("pipeline throughput", "turns/s, openai-compatible backend", rate(ours), rate(rules), unit="turns/s",
                baseline_label="offline rules backend", target="ratio >= 0.5",
                note="same sample, same broker, fresh topics each; the openai row pays HTTP + JSON schema "
                     "checks per LLM call"),
            Row("pipeline throughput", "LLM calls per Stage-1 fact", ours["calls"] / max(ours["facts"], 1), unit="calls")]


def _prompt_eval(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    """The labelled eval set: the rules backend and the openai backend through the test server. The test
    server answers with the rules' own logic, so the run measures the wire path, not a model (a real
    model runs with --base-url): see prompt_eval_rows."""
    import json

    from tests.support.openai_server import OpenAICompatibleServer

    module = importlib.import_module("benchmarks.prompt_eval")
    out_json = work / "prompt_eval.json"
    with OpenAICompatibleServer(model="bench-model") as server:
        module.main(["--base-url", server.base_url, "--model", "bench-model", "--json", str(out_json)])
    return prompt_eval_rows(json.loads(out_json.read_text()))


WIRE_NOTE = ("the test server answers with the rules backend's own logic: this measures the HTTP wire, the "
             "response schema and the parsing, not model quality (a model: prompt_eval.py --base-url)")


def prompt_eval_rows(rows: list[dict]) -> list[Row]:
    """Per task: the rules backend's accuracy on the labelled set (information, no target), the share of
    cases the openai backend through the test server judged exactly as the rules backend did (the row that
    can fail), and the static prefix's share of the prompt tokens."""
    by = {(r["backend"], r["task"]): r for r in rows}
    out = []
    for (backend, task), r in sorted(by.items()):
        if backend == "rules":
            continue
        base = by.get(("rules", task))
        if base:
            out.append(Row("prompt eval", f"{task}: rules backend accuracy on the labelled set", base["accuracy"]))
            wrong, base_wrong, failed = set(r["wrong"]), set(base["wrong"]), set(r.get("failed", ()))
            same = r["cases"] - len(wrong ^ base_wrong) - len(failed - (wrong ^ base_wrong))
            out.append(Row("prompt eval", f"{task}: wire and parsing, cases judged as the rules backend judges "
                           "them (test server)", same / r["cases"] if r["cases"] else 0.0, target=">= 100%",
                           unit="share", note=f"{same} of {r['cases']} cases, {len(failed)} failed calls, "
                                              f"{r.get('unknown_ids', 0)} unknown ids; {WIRE_NOTE}"))
        if r.get("static_prefix_share") is not None:
            out.append(Row("prompt eval", f"{task}: static-prefix share of prompt tokens", r["static_prefix_share"],
                           target=">= 70%"))
    return out


def _api_prompt(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    """benchmarks/api_prompt.py prints its table; run it and read the rows (entries, status, prompt)."""
    import os
    import subprocess

    args = ["--sizes", "100,1000" if quick else "100,1000,10000", "--requests", "90" if quick else "300"]
    env = dict(os.environ, CREDENCE_KAFKA_BOOTSTRAP=bootstrap)
    done = subprocess.run([sys.executable, str(HERE / "api_prompt.py"), *args], env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-500:])
    out = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0].isdigit():
            size = int(parts[0])
            (empty50, empty99), (prompt50, prompt99) = ([float(v) for v in x.split("/")] for x in parts[1:3])
            out.append(Row("serving (prompt route)", f"p50 at {size:,} entries", prompt50, empty50, unit="ms",
                           baseline_label="prompt of a scope with no state"))
            out.append(Row("serving (prompt route)", f"p99 at {size:,} entries", prompt99, empty99, unit="ms",
                           baseline_label="prompt of a scope with no state",
                           target="<= 10" if size == 1000 else ""))
    return out


ADAPTERS: dict[str, Callable[[bool, str, Path], list[Row]]] = {
    "archive_funnel": _archive_funnel,
    "pipeline_throughput": _pipeline_throughput,
    "prompt_eval": _prompt_eval,
    "api_prompt": _api_prompt,
}


def discover() -> list[str]:
    present = {p.stem for p in HERE.glob("*.py")} - NOT_BENCHMARKS
    known = [n for n in ORDER if n in present]
    return known + sorted(present - set(known))


def runner_for(name: str) -> Callable[[bool, str, Path], list[Row]] | None:
    if name in ADAPTERS:
        return ADAPTERS[name]
    module = importlib.import_module(f"benchmarks.{name}")
    return getattr(module, "report_rows", None)


def _header(quick: bool, started: float, settings, partial: bool = False) -> str:
    return (f"{'Quick' if quick else 'Full'} run{' (in progress)' if partial else ''}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {time.monotonic() - started:.0f} s, one Kafka "
            f"{settings.kafka_version} broker, `python -m benchmarks{' --quick' if quick else ''}`. "
            "Ratio = ours / baseline.")


class Merge:
    """--merge: the committed report (read once, before anything is written) with this run's rows merged
    in (report.merged), and a line in its header saying which rows and when."""

    def __init__(self, out: Path, names: list[str], quick: bool) -> None:
        self.out, self.names, self.quick = out, names, quick
        self.rows, self.header = committed(out)

    def write(self, rows: list[Row], failures: dict[str, str]) -> Path:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        header = self.header + (
            f"\n\nThe {', '.join(dict.fromkeys(r.benchmark for r in rows))} rows: `python -m benchmarks --only "
            f"{','.join(self.names)}{' --quick' if self.quick else ''} --merge`, {when}." if rows else "")
        return write(merged(self.rows, rows), header, failures, self.out, plotted={r.benchmark for r in rows})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few minutes")
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--out", default=str(HERE / "results"), help="where REPORT.md and the plots go")
    parser.add_argument("--merge", action="store_true",
                        help="keep the report's other rows: replace only the rows this run measured (with --only)")
    args = parser.parse_args(argv)

    from credence.config import load_settings

    names = discover()
    if args.only:
        wanted = set(args.only.split(","))
        names = [n for n in names if n in wanted]
    rows: list[Row] = []
    failures: dict[str, str] = {}
    started = time.monotonic()
    settings = load_settings()
    merge = Merge(Path(args.out), names, args.quick) if args.merge else None
    with kafka_and_folder(settings) as (bootstrap, work):
        for name in names:
            run = runner_for(name)
            if run is None:
                failures[name] = (f"benchmarks/{name}.py has no report_rows(quick, bootstrap, work); "
                                  f"run `python benchmarks/{name}.py` by itself")
                continue
            t0 = time.monotonic()
            print(f"== {name} …", flush=True)
            try:
                (work / name).mkdir(exist_ok=True)
                got = run(args.quick, bootstrap, work / name)
            except Exception as exc:  # noqa: BLE001 - one broken benchmark must not hide the others
                traceback.print_exc()
                failures[name] = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
                continue
            rows.extend(got)
            print(f"   {len(got)} rows in {time.monotonic() - t0:.0f} s", flush=True)
            # written after each benchmark, so a run stopped half-way still leaves its rows
            if merge is not None:
                merge.write(rows, failures)
            else:
                write(rows, _header(args.quick, started, settings, partial=True), failures, Path(args.out))
    if merge is not None:
        report = merge.write(rows, failures)
    else:
        report = write(rows, _header(args.quick, started, settings), failures, Path(args.out))
    print(report.read_text())
    print(f"wrote {report}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
