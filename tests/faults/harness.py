"""What every fault run shares: a reference run to compare with, and the one comparison of end states.

"Same end state" means: every entry's whole snapshot (kind, status, text, evidence counters and clocks,
version, timestamps) equal, active and archived alike; the same turns taken in per scope; the journal
telling the same story (the same distinct events — a crash may repeat an event, never change or lose
one); and the journal folding to exactly the run's own tables.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from credence.config import Settings
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import (
    DEADLINE_S,
    FAST_GROUP_ENV,
    RunResult,
    collect,
    discard,
    entry_diff,
    entry_digest,
    flush_and_wait_idle,
    fold_archive,
    journal_mismatch,
    pipeline_settings,
    produce_lines,
    scopes_of,
    turn_counts,
    valid_turn_counts,
    wait_turns,
)
from tests.support.turns import end_offsets


def fresh_settings(bootstrap: str, root: Path, **overrides) -> Settings:
    root.mkdir(parents=True, exist_ok=True)
    return pipeline_settings(bootstrap, root, f"f{uuid.uuid4().hex[:10]}", **overrides)


READY_S = 300.0  # a worker's start on a shared, overloaded CI machine (load 30 on 2 cores seen: >60 s)


def reference_run(bootstrap: str, root: Path, lines: list[bytes], deadline_s: float,
                  cuts: tuple[int, ...] = ()) -> RunResult:
    """One worker, one uninterrupted delivery: what every faulted run must end with. With `cuts`, the
    input goes out in pieces, each once everything before it has settled (`settle`), as the faulted runs
    that hold input back deliver it."""
    settings = fresh_settings(bootstrap, root)
    log = root / "reference.log"
    worker = WorkerProcess(settings, bootstrap, log)
    try:
        worker.start(ready_timeout_s=READY_S)
        for before, piece in pieces(lines, cuts):
            if before:
                settle([worker], lines[:before], deadline_s)
            asyncio.run(produce_lines(bootstrap, settings, piece))
        wait_turns_or_explain(worker, valid_turn_counts(lines), deadline_s)
        status = flush_and_wait_idle(worker, bootstrap, settings, scopes_of(lines), deadline_s)
        return collect(worker, bootstrap, settings, scopes_of(lines), status)
    except BaseException:
        print(f"--- reference log tail ({log}) ---\n{log.read_text(errors='replace')[-4000:] if log.exists() else ''}")
        raise
    finally:
        discard(worker)  # collected: nothing reads it again


def pieces(lines: list[bytes], cuts: tuple[int, ...]) -> list[tuple[int, list[bytes]]]:
    """(lines before it, piece) for each piece of `lines` cut at `cuts` (ascending; empty pieces left out)."""
    bounds = [0, *cuts, len(lines)]
    return [(a, lines[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def settle(workers: list[WorkerProcess], produced: list[bytes], deadline_s: float) -> None:
    """Wait until the workers have taken in every turn of `produced` and every scope has drained its
    queue and has no LLM request left (an open window may stay buffered: event time closes it).

    A promotion runs beside its scope and its result is applied where it lands among the scope's records
    (docs/lifecycle.md). Produced at once, the whole input is queued long before any result, so every
    result lands after it; input produced later would land after some results and before others, as the
    machine's speed decides. Settled before each later piece, every run puts each result of the input
    before it ahead of the piece, whatever the speed: a run that holds input back ends like a reference
    run cut at the same places."""
    expected = valid_turn_counts(produced)

    def settled() -> bool:
        views = [w.get("/scopes")["scopes"] for w in workers]
        seen = {scope: view["turns"] for held in views for scope, view in held.items()}
        return seen == expected and not any(v["queued"] or v["requests"] for held in views for v in held.values())

    wait_until(settled, deadline_s, f"{sum(expected.values())} turns to settle (logs: {[str(w.log_path) for w in workers]})")


def story(run: RunResult) -> set[tuple]:
    return {(e["event_id"], e["event"], e["cause"], e["at"]) for e in run.journal}


def end_state_differences(run: RunResult, ref: RunResult) -> dict[str, object]:
    """Empty when `run` ended exactly like `ref`; otherwise what differs, for the assertion message."""
    out: dict[str, object] = {}
    if entry_digest(run.entries) != entry_digest(ref.entries):
        out["active_entries"] = entry_diff(run.entries, ref.entries)
    archived, ref_archived = fold_archive(run.archive), fold_archive(ref.archive)
    if entry_digest(archived) != entry_digest(ref_archived):
        out["archived_entries"] = entry_diff(archived, ref_archived)
    turns = {s: v["turns"] for s, v in run.views.items()}
    ref_turns = {s: v["turns"] for s, v in ref.views.items()}
    if turns != ref_turns:
        out["turns"] = {s: (turns.get(s), ref_turns.get(s)) for s in set(turns) | set(ref_turns)
                        if turns.get(s) != ref_turns.get(s)}
    if story(run) != story(ref):
        out["journal_only_here"] = sorted(story(run) - story(ref))[:20]
        out["journal_only_in_reference"] = sorted(story(ref) - story(run))[:20]
    mismatch = journal_mismatch(run)
    if mismatch:
        out["journal_vs_tables"] = mismatch
    return out


def version_order_violations(journal: list[dict]) -> dict[str, list[int]]:
    """Entries whose journal (in topic order: one entry lives on one partition) is not a strictly
    increasing line of versions once exact repeats are set aside. A crash re-sends events it had sent
    (the same event id with the same snapshot): that is a repeat. Two owners applying one scope at once
    would show as a version going back to one never seen, or one event id naming two snapshots."""
    seen: dict[str, dict[int, dict]] = defaultdict(dict)
    top: dict[str, int] = {}
    bad: dict[str, list[int]] = {}
    for event in journal:
        eid, snap = event["entry_id"], event["entry"]
        version = snap["version"]
        if version in seen[eid]:
            if seen[eid][version] != snap:
                bad.setdefault(eid, []).append(version)
            continue
        if version <= top.get(eid, 0):
            bad.setdefault(eid, []).append(version)
        seen[eid][version] = snap
        top[eid] = max(top.get(eid, 0), version)
    return bad


def taken_in(worker: WorkerProcess) -> int:
    return sum(turn_counts(worker).values())


def input_ends(bootstrap: str, settings: Settings) -> dict[int, int]:
    """{partition: end offset} of the turns topic: once the input is produced, where the replay ends."""
    return asyncio.run(end_offsets(bootstrap, settings.topic("turns"), settings.topic_partitions, settings.kafka))


def unapplied(workers: list[WorkerProcess], settings: Settings, ends: dict[int, int]) -> dict[int, int]:
    """{partition: input records not applied yet} over the turns partitions the workers hold, from the
    positions they report (/status: the next offset each will apply). A held partition whose position a
    worker has not read since its assignment (nothing new arrived on it) is left out: only input seen to
    be waiting counts."""
    turns, positions = settings.topic("turns"), {}
    for worker in workers:
        state = worker.get("/status")["state"]
        for p in state["held_partitions"]:
            position = state["positions"].get(f"{turns}:{p}")
            if position is not None:  # two claims mid-rebalance: the further one
                positions[p] = max(positions.get(p, 0), position)
    return {p: ends[p] - position for p, position in positions.items() if position < ends.get(p, 0)}


@dataclass(frozen=True)
class Landing:
    """Where a fault landed in the replay, read from the workers right before it: the turns taken in, the
    valid turns not taken in yet, and the input records not applied yet per partition (where reported)."""
    taken: int
    turns_left: int
    unapplied: dict[int, int]

    @property
    def mid_replay(self) -> bool:
        """Input was still waiting: a turn not taken in, or a reported position short of its end."""
        return self.turns_left > 0 or bool(self.unapplied)


def landing(workers: list[WorkerProcess], settings: Settings, ends: dict[int, int], total: int) -> Landing:
    taken = sum(taken_in(w) for w in workers)
    return Landing(taken, total - taken, unapplied(workers, settings, ends))


def run_with_kills(settings: Settings, bootstrap: str, lines: list[bytes], log: Path, points: list[int],
                   deadline_s: float, tail_from: int | None = None) -> tuple[RunResult, list[Landing]]:
    """Produce `lines` (with `tail_from`: only those before it), SIGKILL the worker each time the turns it
    has taken in reach the next of `points` (sorted), restart it on the same store; then produce the tail
    once the head has settled, and finish like a clean run. Returns the run and where each kill landed
    (read right before it). A held-back tail makes every kill land mid-replay whatever the machine's
    speed: the worker cannot have taken in turns not produced yet."""
    expected = valid_turn_counts(lines)
    scopes = scopes_of(lines)
    (_, head), *tail = pieces(lines, () if tail_from is None else (tail_from,))
    worker = WorkerProcess(settings, bootstrap, log, extra_env=FAST_GROUP_ENV)
    landed: list[Landing] = []
    try:
        worker.start(ready_timeout_s=READY_S)
        asyncio.run(produce_lines(bootstrap, settings, head))
        ends = input_ends(bootstrap, settings)
        for point in points:
            wait_until(lambda: taken_in(worker) >= point, deadline_s,
                       f"the worker to take in {point} turns (log: {log})")
            landed.append(landing([worker], settings, ends, sum(expected.values())))
            worker.kill()  # SIGKILL: no shutdown hook, no final commit, in-flight LLM calls lost
            worker = WorkerProcess(settings, bootstrap, log, extra_env=FAST_GROUP_ENV).start(ready_timeout_s=READY_S)
        for _, piece in tail:
            settle([worker], head, deadline_s)
            asyncio.run(produce_lines(bootstrap, settings, piece))
        wait_turns_or_explain(worker, expected, deadline_s)
        status = flush_and_wait_idle(worker, bootstrap, settings, scopes, deadline_s)
        return collect(worker, bootstrap, settings, scopes, status), landed
    except BaseException:
        print(f"--- worker log tail ({log}) ---\n{log.read_text(errors='replace')[-4000:] if log.exists() else ''}")
        raise
    finally:
        discard(worker)  # collected: nothing reads it again


def wait_turns_or_explain(worker: WorkerProcess, expected: dict[str, int], deadline_s: float,
                          group: tuple[str, Settings] | None = None) -> None:
    """Wait for every scope's turns; on a timeout print what tells a lost turn's story: the short scopes'
    counts and applied input positions and, with `group` (bootstrap, settings), the consumer group's
    committed offsets against the topics' ends."""
    try:
        wait_turns(worker, expected, deadline_s)
    except Exception:
        counts = turn_counts(worker)
        short = {s: (counts.get(s), n) for s, n in expected.items() if counts.get(s) != n}
        print("turn counts that differ (got, expected):", short, "status:", worker.get("/status"))
        try:  # the explanation must never replace the timeout it explains
            for scope in sorted(short)[:10]:
                view = worker.get(f"/scope/{scope}")
                print(f"  {scope}: turns {view['turns']}, applied {view.get('applied')}, "
                      f"queued {view['queued']}, requests {view['requests']}")
            if group is not None:
                print("  committed vs end offsets of the inputs:", asyncio.run(_group_offsets(*group)))
        except Exception as exc:  # noqa: BLE001
            print(f"  (no more detail: {type(exc).__name__}: {exc})")
        raise


async def _group_offsets(bootstrap: str, settings: Settings) -> dict[str, tuple[int | None, int]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.structs import TopicPartition

    from credence.kafka import client_options

    admin = AIOKafkaAdminClient(**client_options(bootstrap, settings.kafka))
    consumer = AIOKafkaConsumer(**client_options(bootstrap, settings.kafka))
    await admin.start()
    await consumer.start()
    try:
        committed = await admin.list_consumer_group_offsets(settings.app_id)
        tps = [TopicPartition(settings.topic(n), p) for n in ("turns", "facts", "control")
               for p in range(settings.topic_partitions)]
        ends = await consumer.end_offsets(tps)
        return {f"{tp.topic}[{tp.partition}]": (committed[tp].offset if tp in committed else None, ends[tp])
                for tp in tps}
    finally:
        await consumer.stop()
        await admin.close()


def deadline_for(turns: int) -> float:
    """Generous waits for the slow shared CI machine: a floor, plus time per turn (~30 turns/s worst)."""
    return max(2 * DEADLINE_S, turns / 30.0 + 120.0)
