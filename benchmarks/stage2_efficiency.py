"""Stage-2 efficiency against the counting OpenAI-compatible test server.

Generated long conversations through the worker with the `openai` backend; the server records each call's
task and tokens. Reported: LLM calls per 100 turns and per new fact, prompt tokens per user turn, Stage-2
prompts within budget, the static prefix's share; the baseline is a per-turn memory's calls on the same input.
The targets and the baseline: docs/design/benchmarks.md ("Stage-2 efficiency").

    python benchmarks/stage2_efficiency.py [--turns 2000] [--scopes 50]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.report import Row, kafka_and_folder  # noqa: E402
from tests.support.openai_server import OpenAICompatibleServer  # noqa: E402


class CountingServer(OpenAICompatibleServer):
    """The test server, also keeping (task, static prefix tokens, prompt tokens) of every answer."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.prompts: list[tuple[str, int, int]] = []
        self._lock = threading.Lock()

    def _completion(self, messages, content):
        out = super()._completion(messages, content)
        static = sum(self.count_tokens(m["content"]) for m in messages if m.get("role") == "system")
        task = messages[0]["content"][:60] if messages else ""
        with self._lock:
            self.prompts.append((task, static, out["usage"]["prompt_tokens"]))
        return out


def measure(bootstrap: str, work: Path, turns: int, scopes: int) -> dict:
    from credence.config import load_settings
    from credence.config.llm import LLMSettings
    from credence.config.pipeline import PipelineSettings
    from credence.streams.llm.prompts import stage2_classification
    from credence.streams.ops.broker import free_port
    from tests.faults.conversations import conversations
    from tests.support.pipeline import run_pipeline, topic_values

    lines = conversations(turns, scopes, seed=8)
    user_turns = sum(1 for line in lines if json.loads(line)["role"] == "user")
    tag = uuid.uuid4().hex[:8]
    # The server accepts any prompt size here: the budget is measured, not enforced by refusing.
    with CountingServer(model="bench-model", prompt_cap=10**9, observation_cap=10**9) as server:
        settings = load_settings(
            kafka_bootstrap=bootstrap, topic_prefix=f"s2{tag}", app_id=f"s2-{tag}", data_dir=work / tag,
            web_port=free_port(), topic_partitions=4,
            llm=LLMSettings(backend="openai", base_url=server.base_url, model="bench-model", timeout_s=20.0),
            pipeline=PipelineSettings(ticks_advance_clock=False, tick_interval_seconds=2.0,
                                      recall_warm_up=False))
        run = run_pipeline(settings, bootstrap, lines, work / f"{tag}.log", read_topics=False,
                           deadline_s=max(300.0, turns / 5))
        facts = sum(len(r.get("output", {}).get("facts", [])) for r in topic_values(bootstrap, settings, "facts")
                    if r.get("type") == "result" and r.get("task") == "stage1")
        prompts = list(server.prompts)
        violations = list(server.violations)
    budget = settings.memory.stage2_max_prompt_tokens
    s2_prefix = stage2_classification.SYSTEM[:60]
    stage2 = [p for p in prompts if p[0] == s2_prefix]
    calls = run.status["llm"]["stats"]["calls"]
    return {"turns": len(lines), "user_turns": user_turns, "facts": facts, "calls": calls,
            "answered": len(prompts), "prompt_tokens": sum(p[2] for p in prompts),
            "static_tokens": sum(p[1] for p in prompts), "stage2_calls": len(stage2),
            "stage2_within": sum(1 for p in stage2 if p[2] <= budget), "budget": budget,
            "violations": violations}


def rows_from(m: dict) -> list[Row]:
    naive_calls = 2 * m["user_turns"]
    name = "Stage-2 efficiency"
    per_fact_note = (f"{m['calls']} LLM calls for {m['facts']} new facts from {m['turns']} turns "
                     f"({m['user_turns']} by users); baseline = one extraction + one update call per user turn")
    return [
        Row(name, "LLM calls per 100 turns", 100 * m["calls"] / m["turns"], 100 * naive_calls / m["turns"],
            unit="calls", baseline_label="per-turn memory, 2 calls/user turn", target="ratio <= 0.5",
            note=per_fact_note),
        Row(name, "LLM calls per new fact", m["calls"] / max(m["facts"], 1), naive_calls / max(m["facts"], 1),
            unit="calls", baseline_label="per-turn memory", target="<= 0.2"),
        Row(name, "prompt tokens per user turn", m["prompt_tokens"] / max(m["user_turns"], 1), unit="tokens",
            note=f"{m['answered']} answered calls, {m['prompt_tokens']:,} prompt tokens"),
        Row(name, "Stage-2 prompts within budget", m["stage2_within"] / max(m["stage2_calls"], 1), unit="share",
            target=">= 100%", note=f"{m['stage2_within']} of {m['stage2_calls']} Stage-2 prompts ≤ {m['budget']} "
                                   f"tokens; request-check violations: {len(m['violations'])}"),
        Row(name, "prompt tokens in the static prefix", m["static_tokens"] / max(m["prompt_tokens"], 1),
            unit="share", target=">= 70%"),
    ]


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    return rows_from(measure(bootstrap, work, 300 if quick else 2000, 10 if quick else 50))


def main() -> int:
    from credence.config import load_settings

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--scopes", type=int, default=50)
    args = parser.parse_args()
    settings = load_settings()
    with kafka_and_folder(settings) as (bootstrap, work):
        for row in rows_from(measure(bootstrap, work, args.turns, args.scopes)):
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
