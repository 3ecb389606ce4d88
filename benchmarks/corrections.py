"""Corrections that stick: labelled dialogues (benchmarks/corrections/dialogues.jsonl) establish facts, then
correct them the ways people do, beside controls that must keep their facts. Each dialogue is its own
scope, all through one worker (`rules`, and with `--openai` the `openai` backend against the test server);
then each scope's memory block is read. Per kind: stick, new value, false retractions (controls), time to
change (p50 / p99), counted only where the old value was established.

The kinds and the measures in full: docs/design/benchmarks.md ("Corrections that stick").

    python benchmarks/corrections.py [--openai] [--inprocess] [--sample 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.support: the pipeline helpers and the OpenAI-compatible test server

from benchmarks.report import Row, kafka_and_folder, pct  # noqa: E402
from credence.tables.clock import format_instant, parse_instant  # noqa: E402
from credence.tables.entries import Entry  # noqa: E402
from credence.tables.rendering import DISPUTED_HEADING, render_memory_block  # noqa: E402
from credence.tables.scope import Scope  # noqa: E402

DATA = Path(__file__).resolve().parent / "corrections" / "dialogues.jsonl"
T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
SESSION_GAP = timedelta(days=3)
TURN_GAP = timedelta(minutes=1)
TENANT, CHARACTER = "bench", "guide"
REPLY = "I see."  # the character's neutral answer after each user turn the dialogue does not answer itself
GREETING = "Welcome back!"  # the character's line opening the correction session (turns_of says why)


def load(path: Path = DATA) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scope_of(d: dict) -> str:
    return Scope(TENANT, d["id"], CHARACTER).key


def turns_of(d: dict, greet: bool = True) -> tuple[list[dict], datetime]:
    """The dialogue as turn records, and the instant its last session (the correction) starts.

    The last session opens with the character's GREETING a minute before it: that turn closes the earlier
    session's Stage-1 window, so what that session's facts did is applied before `start` and is in the
    block the correction is measured against (without it, the window closed at the correction's own turn
    and `established` read the block from before the earlier session's extraction)."""
    out, scope, last_start = [], Scope(TENANT, d["id"], CHARACTER), T0
    last = len(d["sessions"]) - 1
    for i, session in enumerate(d["sessions"]):
        at = last_start = T0 + i * SESSION_GAP
        if greet and i == last and i > 0:
            out.append({"v": 1, **scope.fields(), "turn_id": f"{d['id']}-{len(out)}", "role": "ai",
                        "text": GREETING, "ts": format_instant(at - TURN_GAP)})
        for j, said in enumerate(session):
            role, text = ("ai", said[4:]) if said.startswith("AI: ") else ("user", said)
            out.append({"v": 1, **scope.fields(), "turn_id": f"{d['id']}-{len(out)}", "role": role, "text": text,
                        "ts": format_instant(at)})
            at += TURN_GAP
            if role == "user" and not (j + 1 < len(session) and session[j + 1].startswith("AI: ")):
                out.append({"v": 1, **scope.fields(), "turn_id": f"{d['id']}-{len(out)}", "role": "ai",
                            "text": REPLY, "ts": format_instant(at)})
                at += TURN_GAP
    return out, last_start


def split_block(text: str) -> tuple[str, str]:
    """(current sections, disputed section) of a memory block's text."""
    current, _, disputed = text.partition(DISPUTED_HEADING)
    return current, disputed


def block_at(entries: list[Entry], scope: str, at: datetime) -> str:
    return render_memory_block(Scope.parse(scope), entries, at).text


@dataclass
class Outcome:
    dialogue: dict
    before: str
    after: str
    change_s: float | None = None

    @property
    def established(self) -> bool:
        return self.dialogue["control"] or self.dialogue["old"] in split_block(self.before)[0]

    @property
    def stuck(self) -> bool:
        return self.dialogue["old"] not in split_block(self.after)[0]

    @property
    def new_value(self) -> bool | None:
        new = self.dialogue.get("new")
        return None if not new else new in split_block(self.after)[0]

    @property
    def false_retraction(self) -> bool:
        return any(k not in split_block(self.after)[0] for k in self.dialogue["keep"])


def change_seconds(d: dict, journal: list[dict], start: datetime) -> float | None:
    """Event time from the correction's first turn to the first event that takes the old entry back
    (more disputation, denied, archived) or creates an entry holding the new value."""
    old, new = d.get("old"), d.get("new")
    for e in sorted(journal, key=lambda e: e["at"]):
        at, entry = parse_instant(e["at"]), e["entry"]
        if at < start or "text" not in entry:
            continue
        taken_back = old and old in entry["text"] and (
            e["event"] in ("archived",) or e.get("to_status") == "denied"
            or (e["event"] == "signal" and (entry.get("evidence") or {}).get(
                "disp_last_signal_at") == e["at"]))
        if taken_back or (new and e["event"] == "created" and new in entry["text"]):
            return (at - start).total_seconds()
    return None


def fold(journal: list[dict], until: datetime) -> list[Entry]:
    """The scope's live entries as the journal says they were just before `until`."""
    live: dict[str, Entry] = {}
    for e in journal:
        if e["entry_kind"] not in ("reflection", "persona") or parse_instant(e["at"]) >= until:
            continue
        snap = Entry.from_dict(e["entry"])
        if snap.id not in live or snap.version >= live[snap.id].version:
            live[snap.id] = snap
    return [e for e in live.values() if e.invalidated_at is None]


# -- runs ----------------------------------------------------------------------------------------------

def run_worker(dialogues: list[dict], bootstrap: str, work: Path, llm=None) -> list[Outcome]:
    """Every dialogue through one worker on `bootstrap`: produce, flush, read each scope's served block."""
    from credence.streams.ops.admin import ensure_topics
    from credence.streams.ops.worker_process import wait_until
    from tests.support.pipeline import pipeline_settings, run_pipeline

    lines, starts = [], {}
    for d in dialogues:
        turns, starts[d["id"]] = turns_of(d)
        lines += [json.dumps(t).encode() for t in turns]
    extra = {"llm": llm} if llm is not None else {}
    settings = pipeline_settings(bootstrap, work, f"corr{uuid.uuid4().hex[:8]}", **extra)
    wait_until(lambda: _topics_ready(bootstrap, settings, ensure_topics), 120.0, "the benchmark's topics")
    result = run_pipeline(settings, bootstrap, lines, work / "worker.log", deadline_s=600.0)
    by_scope: dict[str, list[dict]] = defaultdict(list)
    for e in result.journal:
        by_scope[Scope(e["tenant"], e["user"], e["character"]).key].append(e)
    out = []
    for d in dialogues:
        scope, start = scope_of(d), starts[d["id"]]
        journal = by_scope[scope]
        out.append(Outcome(d, block_at(fold(journal, start), scope, start), result.views[scope]["memory_block"],
                           change_seconds(d, journal, start)))
    return out


def _topics_ready(bootstrap: str, settings, ensure_topics) -> bool:
    """Made and settled before the worker looks for them: a loaded broker may answer a new topic's
    metadata with no partitions for a moment."""
    from credence.errors import BrokerError

    try:
        asyncio.run(ensure_topics(bootstrap, settings))
    except BrokerError:
        return False
    return True


def run_inprocess(dialogues: list[dict]) -> list[Outcome]:
    """The same dialogues through the scope step and the rules backend in this process (seconds, no broker)."""
    from credence.config.memory import MemorySettings
    from credence.config.pipeline import PipelineSettings
    from credence.streams.scope.scope_state import ScopeState
    from tests.unit.scope.conftest import Driver

    out = []
    for d in dialogues:
        scope = scope_of(d)
        driver = Driver(state=ScopeState(scope=scope), memory=MemorySettings(), pipeline=PipelineSettings())
        turns, start = turns_of(d)
        before = None
        for t in turns:
            at = parse_instant(t["ts"])
            if before is None and at >= start:
                before = block_at(list(driver.state.entries.values()), scope, start)
            driver.step("turn", t, at)
        driver.flush()
        end = driver.state.clock
        journal = [e.record for e in driver.emits if e.topic.name == "evidence"]
        out.append(Outcome(d, before or "", block_at(list(driver.state.entries.values()), scope, end),
                           change_seconds(d, journal, start)))
    return out


# -- the table --------------------------------------------------------------------------------------------

@dataclass
class KindStats:
    n: int = 0
    established: int = 0
    stuck: int = 0
    with_new: int = 0
    new: int = 0
    false_retractions: int = 0
    change_s: list[float] = field(default_factory=list)


def tally(outcomes: list[Outcome]) -> dict[str, KindStats]:
    stats: dict[str, KindStats] = defaultdict(KindStats)
    for o in outcomes:
        for kind in (o.dialogue["kind"], "all controls" if o.dialogue["control"] else "all corrections"):
            s = stats[kind]
            s.n += 1
            if o.dialogue["control"]:
                s.false_retractions += o.false_retraction
                continue
            if not o.established:
                continue
            s.established += 1
            s.stuck += o.stuck
            if o.new_value is not None:
                s.with_new += 1
                s.new += o.new_value
            if o.change_s is not None:
                s.change_s.append(o.change_s)
    return dict(stats)


def table(stats: dict[str, KindStats], label: str) -> str:
    rows = [f"{label}", f"{'kind':24} {'n':>4} {'estab':>5} {'stick':>7} {'new value':>10} {'false retr':>10} "
                        f"{'change p50/p99 (event s)':>26}"]
    order = sorted(stats, key=lambda k: (k.startswith("all"), k.startswith("control"), k))
    for kind in order:
        s = stats[kind]
        control = kind.startswith("control") or kind == "all controls"
        stick = "-" if control else f"{s.stuck}/{s.established}"
        new = "-" if control or not s.with_new else f"{s.new}/{s.with_new}"
        fr = f"{s.false_retractions}/{s.n}" if control else "-"
        ch = "-" if not s.change_s else f"{pct(s.change_s, 0.5):.0f} / {pct(s.change_s, 0.99):.0f}"
        rows.append(f"{kind:24} {s.n:>4} {s.established if not control else '-':>5} {stick:>7} {new:>10} {fr:>10} {ch:>26}")
    return "\n".join(rows)


def samples(outcomes: list[Outcome], n: int) -> str:
    """n corrections of different kinds as the memory block shows them before and after."""
    picked, kinds = [], set()
    for o in outcomes:
        if not o.dialogue["control"] and o.established and o.dialogue["kind"] not in kinds:
            picked.append(o)
            kinds.add(o.dialogue["kind"])
    picked += [o for o in outcomes if not o.dialogue["control"] and o.established and o not in picked]
    parts = []
    for o in picked[:n]:
        said = " / ".join(o.dialogue["sessions"][-1])
        parts.append(f"### {o.dialogue['id']} ({o.dialogue['kind']})\nlast session: {said}\n\nbefore:\n```\n"
                     f"{o.before or '(empty)'}\n```\nafter:\n```\n{o.after or '(empty)'}\n```")
    return "\n\n".join(parts)


def _rows(stats: dict[str, KindStats], backend: str) -> list[Row]:
    out = []
    for kind, s in sorted(stats.items()):
        if kind.startswith("control") or kind == "all controls":
            target = "<= 0" if kind == "all controls" else ""
            out.append(Row("corrections", f"{backend}: {kind} false retractions", s.false_retractions, unit="dialogues",
                           target=target, note=f"{s.n} controls"))
            continue
        total = kind == "all corrections"
        out.append(Row("corrections", f"{backend}: {kind} stick rate", s.stuck / max(s.established, 1),
                       target=">= 90%" if total else "", note=f"{s.stuck}/{s.established} established"))
        if s.with_new:
            out.append(Row("corrections", f"{backend}: {kind} new-value rate", s.new / s.with_new,
                           target=">= 80%" if total else "", note=f"{s.new}/{s.with_new}"))
        if total and s.change_s:
            out.append(Row("corrections", f"{backend}: correction turn -> changed block p50 (event time)",
                           pct(s.change_s, 0.5), unit="s"))
            out.append(Row("corrections", f"{backend}: correction turn -> changed block p99 (event time)",
                           pct(s.change_s, 0.99), unit="s"))
    return out


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    """For `python -m benchmarks`: the whole set on the offline default and on the openai path."""
    from credence.config.llm import LLMSettings
    from tests.support.openai_server import OpenAICompatibleServer

    dialogues = load()
    runs = Runs(10)  # each table (and the rules run's sample of ten) printed as in a run by itself
    runs.append(("rules (offline default), one worker", run_worker(dialogues, bootstrap, work / "rules")))
    rows = _rows(tally(runs[-1][1]), "rules")
    if not quick:
        with OpenAICompatibleServer(model="bench-model") as server:
            llm = LLMSettings(backend="openai", base_url=server.base_url, model="bench-model", timeout_s=10.0)
            runs.append(("openai backend (test server), one worker",
                         run_worker(dialogues, bootstrap, work / "openai", llm)))
            rows += _rows(tally(runs[-1][1]), "openai (test server)")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inprocess", action="store_true", help="the scope step in this process, no broker")
    parser.add_argument("--openai", action="store_true", help="also the openai backend against the test server")
    parser.add_argument("--sample", "--samples", dest="samples", type=int, default=0,
                        help="print this many corrections' memory blocks before and after (of different kinds first)")
    parser.add_argument("--only", help="comma-separated dialogue ids or kinds")
    args = parser.parse_args(argv)
    dialogues = load()
    if args.only:
        wanted = set(args.only.split(","))
        dialogues = [d for d in dialogues if d["id"] in wanted or d["kind"] in wanted]
    runs = Runs(args.samples)
    if args.inprocess:
        runs.append(("rules, in process", run_inprocess(dialogues)))
    else:
        from credence.config import load_settings

        with kafka_and_folder(load_settings(), prefix="credence-corrections-") as (bootstrap, work):
            (work / "rules").mkdir()
            runs.append(("rules (offline default), one worker", run_worker(dialogues, bootstrap, work / "rules")))
            if args.openai:
                from credence.config.llm import LLMSettings
                from tests.support.openai_server import OpenAICompatibleServer

                (work / "openai").mkdir()
                with OpenAICompatibleServer(model="bench-model") as server:
                    llm = LLMSettings(backend="openai", base_url=server.base_url, model="bench-model", timeout_s=10.0)
                    runs.append(("openai backend (test server), one worker",
                                 run_worker(dialogues, bootstrap, work / "openai", llm)))
    return 0


class Runs(list):
    """Each run's table printed as soon as it is done (a later run that fails leaves the earlier ones)."""

    def __init__(self, n_samples: int) -> None:
        super().__init__()
        self.n_samples = n_samples

    def append(self, run: tuple[str, list[Outcome]]) -> None:
        super().append(run)
        label, outcomes = run
        print(table(tally(outcomes), label), "\n", flush=True)
        for o in outcomes:
            bad = (o.dialogue["control"] and o.false_retraction) or (not o.dialogue["control"] and o.established and (
                not o.stuck or o.new_value is False))
            if bad or (not o.dialogue["control"] and not o.established):
                what = "NOT ESTABLISHED" if not o.established else "MISS"
                print(f"  {what} {o.dialogue['id']}: {' / '.join(o.dialogue['sessions'][-1])}\n    after: "
                      f"{' | '.join(o.after.splitlines())}")
        if self.n_samples and len(self) == 1:
            print(samples(outcomes, self.n_samples), "\n", flush=True)


if __name__ == "__main__":
    sys.exit(main())
