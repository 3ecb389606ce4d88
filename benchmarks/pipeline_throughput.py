"""Pipeline throughput and LLM cost per fact, measured end to end on the real broker.

Runs the same conversations twice in one process, each on fresh topics and a fresh worker:
  baseline  — the built-in `rules` backend (no HTTP),
  openai    — the `openai` backend against the local OpenAI-compatible test server (HTTP + JSON schema
              validation on both sides; the server answers with the rules' logic),
and reports turns/s of each, their ratio, and per Stage-1 fact: LLM calls and prompt tokens (from the
server's `usage`). Usage: python benchmarks/pipeline_throughput.py [--input FILE] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the test server and the pipeline helpers

from benchmarks.report import kafka_and_folder  # noqa: E402
from credence.config import load_settings  # noqa: E402
from credence.config.llm import LLMSettings  # noqa: E402
from credence.config.pipeline import PipelineSettings  # noqa: E402
from credence.streams.ops.admin import ensure_topics  # noqa: E402
from credence.streams.ops.broker import free_port  # noqa: E402
from tests.support.openai_server import OpenAICompatibleServer  # noqa: E402
from tests.support.pipeline import run_pipeline, topic_values  # noqa: E402


def run_once(bootstrap: str, lines: list[bytes], work: Path, llm: LLMSettings) -> dict:
    tag = uuid.uuid4().hex[:8]
    settings = load_settings(
        kafka_bootstrap=bootstrap, topic_prefix=f"bench{tag}", app_id=f"bench-{tag}", data_dir=work / tag,
        web_port=free_port(), topic_partitions=4, llm=llm,
        pipeline=PipelineSettings(ticks_advance_clock=False, tick_interval_seconds=2.0, recall_warm_up=False),
    )
    asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    started = time.monotonic()
    result = run_pipeline(settings, bootstrap, lines, work / f"{tag}.log", read_topics=False)
    elapsed = time.monotonic() - started
    facts = sum(len(r.get("output", {}).get("facts", [])) for r in topic_values(bootstrap, settings, "facts")
                if r.get("type") == "result")
    llm_stats = result.status["llm"]["stats"]
    return {"seconds": elapsed, "turns": len(lines), "facts": facts, "calls": llm_stats["calls"],
            "prompt_tokens": llm_stats["prompt_tokens"], "completion_tokens": llm_stats["completion_tokens"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", default=str(ROOT / "streams" / "ops" / "data" / "sample_turns.jsonl"))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    lines = [line for line in Path(args.input).read_bytes().splitlines() if line.strip()]
    settings = load_settings()
    with OpenAICompatibleServer(model="bench-model") as server, kafka_and_folder(settings) as (bootstrap, work):
        openai = LLMSettings(backend="openai", base_url=server.base_url, model="bench-model", timeout_s=10.0)
        rows = {"rules": [], "openai": []}
        for _ in range(args.runs):  # interleaved, so drift in the machine's speed hits both alike
            rows["rules"].append(run_once(bootstrap, lines, work, LLMSettings()))
            rows["openai"].append(run_once(bootstrap, lines, work, openai))
        assert not server.violations, server.violations
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in rows.items()}
    print(f"{len(lines)} turns, {args.runs} interleaved runs each, medians:")
    for name, m in med.items():
        print(f"  {name:<7} {m['seconds']:6.1f} s  {m['turns'] / m['seconds']:6.1f} turns/s  facts {m['facts']:.0f}  "
              f"LLM calls/fact {m['calls'] / max(m['facts'], 1):.2f}  "
              f"prompt tokens/fact {m['prompt_tokens'] / max(m['facts'], 1):.0f}")
    ratio = statistics.median(o["seconds"] / r["seconds"] for o, r in zip(rows["openai"], rows["rules"]))
    print(f"  openai/rules time ratio (pairwise median): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
