"""Prompt eval: the hand-labelled cases in benchmarks/prompt_eval/*.jsonl through the `rules` backend and,
with --base-url, through any OpenAI-compatible server (vLLM on a GPU, or the test server in CI).

Per task it reports: accuracy against the labels (overall and per language), failed calls (LLMError
after the retries), output items dropped for naming an id the call never offered, retries, prompt and
completion tokens per case (the server's `usage`), and the static-prefix share of the prompt tokens
(the system prompt's tokens, approximated, over all prompt tokens: what vLLM's prefix cache serves).

    python benchmarks/prompt_eval.py                                    # rules baseline only
    python benchmarks/prompt_eval.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from credence.config.llm import LLMSettings  # noqa: E402
from credence.errors import CredenceError  # noqa: E402
from credence.streams.llm.backend import LLMBackend  # noqa: E402
from credence.streams.llm.models import CorrectionItem, Fact, Observation, ReflectionDraft, Turn  # noqa: E402
from credence.streams.llm.prompts import (  # noqa: E402
    correction,
    merge_decision,
    negative_keyword_target,
    recent_summary,
    refine_cluster,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.token_budget import approx_tokens  # noqa: E402
from credence.tables.origin import fact_id  # noqa: E402

DATA = ROOT / "benchmarks" / "prompt_eval"
LANGS = ("en", "de", "es")


# -- turning a case into a call, and judging the answer --------------------------------------------

def _facts(rows: list[list]) -> list[Fact]:
    return [Fact(id=fact_id([f"t{i}"], s, p, t), text=t, subject=s, polarity=p, importance=6,
                 source_turn_ids=[f"t{i}"]) for i, (t, s, p) in enumerate(rows)]


def _observations(rows: list[list], prefix: str = "obs") -> list[Observation]:
    # Long, realistic ids: the model must never see them (it sees O1, O2, ...).
    return [Observation(id=f"{prefix}-{i:04d}-{hashlib.sha256(r[0].encode()).hexdigest()[:12]}", text=r[0], subject=r[1],
                        score=r[2] if len(r) > 2 else None) for i, r in enumerate(rows)]


def _mentions(fact: Any, about: list[str]) -> bool:
    said = f"{fact.subject} {fact.text}".lower()
    return any(a.lower() in said for a in about)


async def stage1(backend: LLMBackend, case: dict) -> bool:
    turns = [Turn(id=f"turn-{i:03d}", role=role, text=text, ts="2026-01-01T00:00:00Z")
             for i, (role, text) in enumerate(case["turns"])]
    facts = list(await backend.ask(stage1_extraction, turns))
    if len(facts) != len(case["expect"]):
        return False
    for want in case["expect"]:
        match = next((f for f in facts if f.polarity == want["polarity"] and _mentions(f, want["about"])
                      and (f.importance == 10) == (want.get("importance") == 10)), None)
        if match is None:
            return False
        facts.remove(match)
    return True


async def stage2(backend: LLMBackend, case: dict) -> bool:
    facts, obs = _facts(case["facts"]), _observations(case["observations"])
    got = {(c.fact_id, c.observation_id, c.relation) for c in await backend.ask(stage2_classification, facts, obs, fit=backend.budget)}
    return got == {(facts[f].id, obs[o].id, rel) for f, o, rel in case["expect"]}


async def feedback(backend: LLMBackend, case: dict) -> bool:
    obs = _observations(case["surfaced"])
    got = await backend.ask(surfaced_feedback, case["reply"], obs, case["ai"])
    return [d.decision for d in got] == case["expect"] and [d.id for d in got] == [o.id for o in obs]


async def target(backend: LLMBackend, case: dict) -> bool:
    obs = _observations(case["observations"])
    got = await backend.ask(negative_keyword_target, case["messages"], obs, case["ai"])
    return set(got.ids) == {obs[i].id for i in case["expect"]} and got.forget == case.get("forget", False)


async def synthesis(backend: LLMBackend, case: dict) -> bool:
    facts, existing = _facts(case["facts"]), _observations(case["existing"], "rel")
    drafts = list(await backend.ask(reflection_synthesis, facts, existing))
    if len(drafts) != len(case["expect"]):
        return False
    for want in case["expect"]:
        sources = {facts[i].id for i in want["sources"]}
        match = next((d for d in drafts if set(d.source_fact_ids) == sources and _mentions(d, want["about"])), None)
        if match is None:
            return False
        drafts.remove(match)
    return True


async def merge(backend: LLMBackend, case: dict) -> bool:
    text, subject, score = case["reflection"]
    draft = ReflectionDraft(text=text, subject=subject, source_fact_ids=["f-1"], score=score)
    personas = _observations(case["personas"], "persona")
    got = await backend.ask(merge_decision, draft, personas)
    want = case["expect"]
    if got.action != want["action"]:
        return False
    return got.action != "merge" or got.target_id == personas[want["target"]].id


# -- correction work --
async def correct(backend: LLMBackend, case: dict) -> bool:
    (old, old_score), (new, new_score) = case["old"], case["new"]
    item = CorrectionItem(id=f"corr-{case['id']}", old=Observation(id=f"persona-{case['id']}", text=old, score=old_score),
                          new_text=new, new_score=new_score)
    got = await backend.ask(correction, [item])
    return [(d.id, d.action) for d in got] == [(item.id, case["expect"])]


async def refine(backend: LLMBackend, case: dict) -> bool:
    """The actions (kind and sources) are the labelled ones; a split says two things or more."""
    entries = _observations([[text, "", score] for text, score in case["entries"]], "entry")
    position = {e.id: i for i, e in enumerate(entries)}
    got = await backend.ask(refine_cluster, entries)
    if any(a.action == "split" and len(a.texts) < 2 for a in got):
        return False
    said = sorted((a.action, sorted(position[i] for i in a.source_ids)) for a in got)
    return said == sorted((w["action"], sorted(w["sources"])) for w in case["expect"])


async def summarise(backend: LLMBackend, case: dict) -> bool:
    """The memo keeps every expected word, none of the small talk, and its budget; with nothing worth
    keeping and no memo, it is empty."""
    turns = [Turn(id=f"turn-{i:03d}", role=role, text=text, ts="2026-01-01T00:00:00Z")
             for i, (role, text) in enumerate(case["turns"])]
    got = await backend.ask(recent_summary, case["memo"], turns, case["max_tokens"])
    said = got.lower()
    if approx_tokens(got) > case["max_tokens"] or any(w.lower() in said for w in case["absent"]):
        return False
    if not case["expect"] and not case["memo"]:
        return not got.strip()
    return all(w.lower() in said for w in case["expect"])


@dataclass(frozen=True)
class Task:
    name: str
    file: str
    run: Callable[[LLMBackend, dict], Awaitable[bool]]
    prompt: Any  # the prompt module: its SYSTEM is the static prefix


TASKS = (
    Task("stage1", "stage1.jsonl", stage1, stage1_extraction),
    Task("stage2", "stage2.jsonl", stage2, stage2_classification),
    Task("feedback", "feedback.jsonl", feedback, surfaced_feedback),
    Task("target", "target.jsonl", target, negative_keyword_target),
    Task("synthesis", "synthesis.jsonl", synthesis, reflection_synthesis),
    Task("merge", "merge.jsonl", merge, merge_decision),
    # -- correction work --
    Task("correction", "correction.jsonl", correct, correction),
    Task("refine", "refine.jsonl", refine, refine_cluster),
    Task("summarise", "summarise.jsonl", summarise, recent_summary),
)


def load_cases(task: Task) -> list[dict]:
    path = DATA / task.file
    cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids = [c["id"] for c in cases]
    if len(set(ids)) != len(ids):
        raise CredenceError(f"{path}: duplicate case ids")
    return cases


# -- running ---------------------------------------------------------------------------------------

@dataclass
class Row:
    backend: str
    task: str
    cases: int = 0
    correct: int = 0
    by_lang: Counter = field(default_factory=Counter)
    lang_total: Counter = field(default_factory=Counter)
    failed_calls: int = 0
    unknown_ids: int = 0
    retries: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prefix_share: float | None = None
    wrong: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # the cases whose call failed (also in `wrong`)

    def as_dict(self) -> dict:
        per_lang = {lang: round(self.by_lang[lang] / self.lang_total[lang], 3)
                    for lang in LANGS if self.lang_total[lang]}
        return {"backend": self.backend, "task": self.task, "cases": self.cases,
                "accuracy": round(self.correct / self.cases, 3) if self.cases else None,
                "accuracy_by_lang": per_lang, "failed_calls": self.failed_calls,
                "unknown_ids": self.unknown_ids, "retries": self.retries, "calls": self.calls,
                "prompt_tokens_per_case": round(self.prompt_tokens / self.cases, 1) if self.cases else 0,
                "completion_tokens_per_case": round(self.completion_tokens / self.cases, 1) if self.cases else 0,
                "static_prefix_share": self.prefix_share, "wrong": self.wrong, "failed": self.failed}


async def run_task(make: Callable[[], LLMBackend], label: str, task: Task, cases: list[dict],
                   concurrency: int) -> Row:
    """A fresh backend per task, so its stats are the task's."""
    backend = make()
    row = Row(label, task.name)
    slots = asyncio.Semaphore(concurrency)

    async def one(case: dict) -> tuple[dict, bool | None]:
        async with slots:
            try:
                return case, await task.run(backend, case)
            except CredenceError as exc:  # LLMError after the retries: counted, judged wrong
                logging.getLogger(__name__).warning("%s %s %s: %s", label, task.name, case["id"], exc)
                return case, None

    try:
        for case, ok in await asyncio.gather(*(one(c) for c in cases)):
            row.cases += 1
            row.lang_total[case["lang"]] += 1
            row.failed_calls += ok is None
            if ok is None:
                row.failed.append(case["id"])
            if ok:
                row.correct += 1
                row.by_lang[case["lang"]] += 1
            else:
                row.wrong.append(case["id"])
    finally:
        await backend.aclose()
    stats = backend.stats
    row.unknown_ids, row.retries, row.calls = stats.unknown_ids, stats.retries, stats.calls
    row.prompt_tokens, row.completion_tokens = stats.prompt_tokens, stats.completion_tokens
    if stats.prompt_tokens:
        prefix = approx_tokens(task.prompt.SYSTEM) * (stats.calls + stats.retries)
        row.prefix_share = round(min(1.0, prefix / stats.prompt_tokens), 3)
    return row


def rules_backend() -> LLMBackend:
    from credence.streams.llm.rules.backend import RulesBackend

    return RulesBackend()


def openai_backend(settings: LLMSettings) -> Callable[[], LLMBackend]:
    from credence.streams.llm.openai_backend import OpenAIBackend

    return lambda: OpenAIBackend(settings)


async def evaluate(backends: list[tuple[str, Callable[[], LLMBackend]]], tasks: list[Task],
                   concurrency: int) -> list[Row]:
    rows = []
    for label, make in backends:
        for task in tasks:
            rows.append(await run_task(make, label, task, load_cases(task), concurrency))
    return rows


# -- reporting -------------------------------------------------------------------------------------

HEADER = ("backend", "task", "cases", "acc", "en", "de", "es", "failed", "unk_ids", "retries",
          "prompt/case", "compl/case", "prefix")


def table(rows: list[Row]) -> str:
    lines = [HEADER]
    for row in rows:
        d = row.as_dict()
        lines.append((
            row.backend, row.task, str(row.cases), f"{d['accuracy']:.3f}",
            *(f"{d['accuracy_by_lang'].get(lang, float('nan')):.2f}" for lang in LANGS),
            str(row.failed_calls), str(row.unknown_ids), str(row.retries),
            f"{d['prompt_tokens_per_case']:.0f}", f"{d['completion_tokens_per_case']:.0f}",
            "-" if row.prefix_share is None else f"{row.prefix_share:.2f}",
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", help="OpenAI-compatible server, with /v1 (omit: rules backend only)")
    parser.add_argument("--model", help="served model name (vLLM --served-model-name); needed with --base-url")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--tasks", default=",".join(t.name for t in TASKS),
                        help="comma-separated subset of: " + ", ".join(t.name for t in TASKS))
    parser.add_argument("--concurrency", type=int, default=8, help="cases in flight per task")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--json", dest="json_path", help="also write the rows (with wrong case ids) here")
    parser.add_argument("--no-rules", action="store_true", help="skip the rules baseline")
    args = parser.parse_args(argv)
    known = {t.name for t in TASKS}
    chosen = [t for t in args.tasks.split(",") if t]
    if not chosen or set(chosen) - known:
        parser.error(f"--tasks must name some of {sorted(known)}")
    if args.base_url and not args.model:
        parser.error("--base-url needs --model (the served model name)")
    if args.no_rules and not args.base_url:
        parser.error("--no-rules leaves nothing to run without --base-url")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(message)s")
    tasks = [t for t in TASKS if t.name in args.tasks.split(",")]
    backends: list[tuple[str, Callable[[], LLMBackend]]] = [] if args.no_rules else [("rules", rules_backend)]
    if args.base_url:
        settings = LLMSettings(backend="openai", base_url=args.base_url, model=args.model, api_key=args.api_key,
                               timeout_s=args.timeout, max_retries=args.max_retries,
                               max_concurrency=args.concurrency)
        backends.append((args.model, openai_backend(settings)))
    rows = asyncio.run(evaluate(backends, tasks, args.concurrency))
    print(table(rows))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps([r.as_dict() for r in rows], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
