"""Shared helpers for the whole-pipeline integration tests: run a worker over a replay, flush, wait for
the pipeline to idle, and collect what it ended with (entries per scope, journal, archive, facts).

Everything waits on a condition with a deadline (`wait_until`), never on a sleep.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaProducer

from credence.config import Settings, load_settings
from credence.config.pipeline import PipelineSettings
from credence.errors import RecordError
from credence.kafka import client_options
from credence.records.turn import decode_turn
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.broker import free_port
from credence.streams.ops.replay import send_control
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.scope.context import FACTS_KIND
from credence.tables.entries import Entry, apply_snapshot
from credence.tables.scope import scope_key
from tests.support.turns import end_offsets, read_topic

SAMPLE = Path(__file__).resolve().parents[2] / "streams" / "ops" / "data" / "sample_turns.jsonl"

# Historical replay: event time comes from the records; 1 s ticks only re-issue lost/failed requests.
REPLAY_PIPELINE = PipelineSettings(ticks_advance_clock=False, tick_interval_seconds=1.0)
PARTITIONS = 2
DEADLINE_S = 90.0
# A SIGKILLed member stays in its consumer group until its session times out (Faust default 60 s);
# Faust reads these from the environment.
FAST_GROUP_ENV = {"BROKER_SESSION_TIMEOUT": "6", "BROKER_HEARTBEAT_INTERVAL": "1"}


def pipeline_settings(bootstrap: str, root: Path, prefix: str, **overrides) -> Settings:
    """Settings like conftest's `settings_factory` gives, for fixtures wider than one test (its own topics,
    group, data dir and web port), on a small partition count and replaying on event time."""
    base = dict(kafka_bootstrap=bootstrap, topic_prefix=prefix, app_id=f"{prefix}-app", data_dir=root / "data",
                web_port=free_port(), topic_partitions=PARTITIONS, core_config_path=root / "core_config.json",
                pipeline=REPLAY_PIPELINE)
    base.update(overrides)
    return load_settings(**base)


# -- input --------------------------------------------------------------------------------------

def sample_lines(scopes: list[str] | None = None, path: Path = SAMPLE) -> list[bytes]:
    """The sample file's non-blank lines, optionally only those of `scopes` (in file order). Lines that
    are not JSON objects naming a scope are kept only when no filter is given."""
    out = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        if scopes is not None and line_scope(line) not in scopes:
            continue
        out.append(line)
    return out


def line_scope(line: bytes) -> str | None:
    try:
        obj = json.loads(line)
        return scope_key(obj["tenant"], obj["user"], obj["character"])
    except (ValueError, KeyError, TypeError):
        return None


def scopes_of(lines: list[bytes]) -> list[str]:
    return list(dict.fromkeys(s for s in map(line_scope, lines) if s))


def valid_turn_counts(lines: list[bytes]) -> dict[str, int]:
    """Distinct valid turns per scope, as the worker must count them (validity decided by the worker's
    own decoder; invalid lines go to the DLQ, repeated turn ids count once)."""
    seen: dict[str, set[str]] = {}
    for line in lines:
        try:
            turn = decode_turn(line)
        except RecordError:
            continue
        seen.setdefault(turn.scope, set()).add(turn.turn_id)
    return {scope: len(ids) for scope, ids in seen.items()}


def invalid_lines(lines: list[bytes]) -> int:
    """How many of `lines` the worker must dead-letter as invalid turns."""
    count = 0
    for line in lines:
        try:
            decode_turn(line)
        except RecordError:
            count += 1
    return count


async def produce_lines(bootstrap: str, settings: Settings, lines: list[bytes]) -> int:
    """Produce `lines` in order to the turns topic, keyed by scope, every record acknowledged."""
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", linger_ms=5))
    await producer.start()
    try:
        futures = []
        for line in lines:
            key = line_scope(line)
            futures.append(await producer.send(settings.topic("turns"), line, key=key.encode() if key else None))
        for fut in futures:
            await fut
    finally:
        await producer.stop()
    return len(lines)


# -- asking the worker --------------------------------------------------------------------------

def turn_counts(worker: WorkerProcess) -> dict[str, int]:
    return {scope: int(n) for scope, n in worker.get("/scopes")["turn_counts"].items()}


def wait_turns(worker: WorkerProcess, expected: dict[str, int], deadline_s: float = DEADLINE_S) -> None:
    """Every scope has applied (or queued) exactly its expected distinct turns."""
    wait_until(lambda: turn_counts(worker) == expected, deadline_s,
               f"the worker to take in {sum(expected.values())} turns (log: {worker.log_path})")


def idle_status(worker: WorkerProcess, scopes: list[str]) -> dict | None:
    """/status when the pipeline has nothing left to do: no scope busy, queued, buffering or waiting for
    an LLM result (the per-scope `idle` comes from the changelogged state, so it also holds right after a
    restart, when the worker's in-memory busy set is still empty), and no LLM call running."""
    status = worker.get("/status")
    if status["busy_scopes"] or status["llm"]["inflight"]:
        return None
    known = worker.get("/scopes")["scopes"]
    if any(s not in known or not known[s]["idle"] for s in scopes):
        return None
    return status


def flush_and_wait_idle(worker: WorkerProcess, bootstrap: str, settings: Settings, scopes: list[str],
                        deadline_s: float = DEADLINE_S) -> dict:
    """Close the scopes' windows once the worker has read every turn produced so far, then wait for the
    pipeline to idle.

    The flush travels on `control`, the turns on `turns`: fetched together (a busy worker), the flush can be
    applied first, find the window still empty, and leave the turns after it in an open window for good.
    So the flush goes out only when the worker's positions (/status) reach the turns topic's end on every
    partition it holds. (The group's committed offset cannot say it: a worker restarted at its stored
    positions with nothing left to read commits nothing.)"""
    turns = settings.topic("turns")
    ends = asyncio.run(end_offsets(bootstrap, turns, settings.topic_partitions, settings.kafka))

    def read_all() -> bool:
        state = worker.get("/status")["state"]
        return all(state["positions"].get(f"{turns}:{p}", 0) >= end
                   for p, end in ends.items() if end and p in state["held_partitions"])

    wait_until(read_all, deadline_s, f"the worker to read every turn before the flush (log: {worker.log_path})")
    asyncio.run(send_control(bootstrap, settings, scopes, "flush"))
    return wait_until(lambda: idle_status(worker, scopes), deadline_s,
                      f"the pipeline to idle after the flush (log: {worker.log_path})")


def scope_views(worker: WorkerProcess, scopes: list[str]) -> dict[str, dict]:
    return {scope: worker.get(f"/scope/{scope}") for scope in scopes}


def active_entries(views: dict[str, dict]) -> dict[str, Entry]:
    """{entry_id: Entry} of every entry the scopes hold (from the views' full snapshots)."""
    out: dict[str, Entry] = {}
    for view in views.values():
        for e in view["entries"]:
            assert e["id"] not in out, f"entry {e['id']} in two scopes"
            out[e["id"]] = Entry.from_dict(e["snapshot"])
    return out


# -- reading topics -----------------------------------------------------------------------------

def topic_values(bootstrap: str, settings: Settings, name: str) -> list[dict]:
    """Every record of a credence topic, decoded, in partition order."""
    records = asyncio.run(read_topic(bootstrap, settings.topic(name), settings.topic_partitions, settings.kafka))
    return [json.loads(r.value) for r in records]


def fold_journal(events: list[dict]) -> dict[str, Entry]:
    """The journal replayed: each event's snapshot applied with `apply_snapshot` (newer version wins), of
    each scope's newest incarnation (a forgotten life's entries are not the scope's)."""
    from credence.streams.runtime.journal import one_incarnation

    out: dict[str, Entry] = {}
    for event in one_incarnation(events):
        if event["entry_kind"] == FACTS_KIND:
            continue  # what became of a request's facts (docs/records.md): no entry to fold
        snap = Entry.from_dict(event["entry"])
        life = f"~{event['incarnation']}" if event.get("incarnation") else ""  # records.journal.event_id
        assert snap.id == event["entry_id"] and event["event_id"] == f"{snap.id}@{snap.version}{life}", event
        out[snap.id] = apply_snapshot(out.get(snap.id), snap)
    return out


def journal_mismatch(run: RunResult) -> dict[str, object]:
    """Where the folded journal and the worker's tables disagree (empty when they agree). The tables are
    the active entries (scope views) plus the archived ones (credence.archive). Also: one event id
    ("<entry_id>@<version>") never names two different snapshots (a re-send repeats the same one), and
    folding the journal twice gives the same result (idempotent application)."""
    by_event: dict[str, dict] = {}
    clashes = sorted({e["event_id"] for e in run.journal
                      if by_event.setdefault(e["event_id"], e["entry"]) != e["entry"]})
    folded = fold_journal(run.journal)
    twice = fold_journal(run.journal + run.journal)
    archived = fold_archive(run.archive)
    out: dict[str, object] = {}
    if clashes:
        out["event_id_names_two_snapshots"] = clashes
    # An id archived and later re-created (deterministic ids) is in both; its version line continues, so
    # the live entry must be the newer one and is what the tables hold now.
    stale = {i: {"active_version": run.entries[i].version, "archived_version": archived[i].version}
             for i in sorted(set(run.entries) & set(archived)) if run.entries[i].version <= archived[i].version}
    if stale:
        out["active_not_newer_than_archived"] = stale
    tables = archived | run.entries
    if folded != tables:
        out["fold_vs_tables"] = entry_diff(folded, tables)
    if twice != folded:
        out["fold_twice"] = entry_diff(twice, folded)
    return out


def fold_archive(records: list[dict]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for rec in records:
        snap = Entry.from_dict(rec["entry"])
        out[snap.id] = apply_snapshot(out.get(snap.id), snap)
    return out


def stage1_fact_ids(bootstrap: str, settings: Settings) -> Counter:
    """How often each fact id occurs across every Stage-1 result on credence.facts."""
    ids: Counter = Counter()
    for rec in topic_values(bootstrap, settings, "facts"):
        if rec.get("type") == "result" and rec.get("task") == "stage1":
            ids.update(f["id"] for f in rec["output"]["facts"])
    return ids


def request_outcomes(bootstrap: str, settings: Settings) -> tuple[Counter, Counter]:
    """(results, failures) per "scope|request_id", from the LLM runner's records on credence.facts
    (Stage-1 results) and credence.control (every other result, and every failure)."""
    results: Counter = Counter()
    failed: Counter = Counter()
    for name in ("facts", "control"):
        for rec in topic_values(bootstrap, settings, name):
            if rec.get("type") not in ("result", "failed"):
                continue
            key = f"{rec['tenant']}/{rec['user']}/{rec['character']}|{rec['request_id']}"
            (results if rec["type"] == "result" else failed)[key] += 1
    return results, failed


def entry_digest(entries: dict[str, Entry]) -> dict[str, dict]:
    """What two runs must agree on, per entry: the whole snapshot (ids, status, evidence counters,
    version, timestamps)."""
    return {eid: e.to_dict() for eid, e in sorted(entries.items())}


def start_together(workers: list[WorkerProcess], ready_timeout_s: float = 120.0) -> list[WorkerProcess]:
    """Start workers of one group at once and wait until each is ready: one start's time (and one
    rebalance) instead of one per worker, where the test needs them running side by side, not joining in
    turn. The deadline is for them all, importing side by side on a loaded machine: twice `start`'s."""
    for worker in workers:
        worker.launch()
    for worker in workers:
        wait_until(lambda w=worker: w.get("/status").get("ready"), ready_timeout_s,
                   f"the worker to be ready (log: {worker.log_path})")
    return workers


def discard(worker: WorkerProcess) -> None:
    """End a worker the test is done with, store, group and topics all: SIGKILL, not the graceful stop. A
    graceful stop closes every table's stores (a flush each) and leaves the group: ~5 s of a loaded 2-core
    CI machine per worker, spent on a data dir and a group nothing uses again. Only where nothing reads the
    worker's topics afterwards either (a transaction open at the kill is aborted, and its records with it),
    no later worker starts on its store or group, and the stop itself is not under test: elsewhere `stop`."""
    worker.kill()


# -- one whole run ------------------------------------------------------------------------------

@dataclass
class RunResult:
    settings: Settings
    status: dict
    views: dict[str, dict]
    entries: dict[str, Entry]
    journal: list[dict] = field(default_factory=list)
    archive: list[dict] = field(default_factory=list)


def collect(worker: WorkerProcess, bootstrap: str, settings: Settings, scopes: list[str], status: dict,
            read_topics: bool = True) -> RunResult:
    views = scope_views(worker, scopes)
    result = RunResult(settings=settings, status=status, views=views, entries=active_entries(views))
    if read_topics:
        result.journal = topic_values(bootstrap, settings, "evidence")
        result.archive = topic_values(bootstrap, settings, "archive")
    return result


def run_pipeline(settings: Settings, bootstrap: str, lines: list[bytes], log_path: Path, *,
                 expected_turns: dict[str, int] | None = None, extra_env: dict | None = None,
                 deadline_s: float = DEADLINE_S, read_topics: bool = True, then_discard: bool = False) -> RunResult:
    """Start a worker, produce `lines`, wait until every turn is in, flush, wait idle, collect, stop (with
    `then_discard`, SIGKILL: for a caller that reads nothing of the run but what was collected)."""
    scopes = scopes_of(lines)
    expected = expected_turns if expected_turns is not None else valid_turn_counts(lines)
    worker = WorkerProcess(settings, bootstrap, log_path, extra_env=extra_env)
    try:
        worker.start()
        asyncio.run(produce_lines(bootstrap, settings, lines))
        wait_turns(worker, expected, deadline_s)
        status = flush_and_wait_idle(worker, bootstrap, settings, scopes, deadline_s)
        return collect(worker, bootstrap, settings, scopes, status, read_topics)
    except BaseException:
        tail = log_path.read_text(errors="replace")[-4000:] if log_path.exists() else ""
        print(f"--- worker log tail ({log_path}) ---\n{tail}")
        raise
    finally:
        if then_discard:
            discard(worker)
        else:
            worker.stop()


def entry_diff(a: dict[str, Entry], b: dict[str, Entry]) -> dict[str, object]:
    """A compact difference between two {entry_id: Entry} maps, for assertion messages: ids only on one
    side, and per shared id the top-level (and evidence) fields that differ as (a, b)."""
    out: dict[str, object] = {}
    for eid in sorted(set(a) | set(b)):
        if eid not in b:
            out[eid] = "only in the first"
        elif eid not in a:
            out[eid] = "only in the second"
        else:
            da, db = a[eid].to_dict(), b[eid].to_dict()
            ev_a, ev_b = da.pop("evidence"), db.pop("evidence")
            fields = {k: (da[k], db[k]) for k in da if da[k] != db[k]}
            fields |= {f"evidence.{k}": (ev_a[k], ev_b[k]) for k in ev_a if ev_a[k] != ev_b[k]}
            if fields:
                out[eid] = fields
    return out


# The input of the secured, outage and replicated-cluster tests: three scopes, two of them one user's (so
# `forget` has a user with several scopes), 150 lines.
CLUSTER_LINES = sample_lines(["acme/bob/barista", "acme/alice/tutor", "acme/alice/barista"])
