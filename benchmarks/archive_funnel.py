"""Funnel report over a generated evidence journal: our views vs the same GROUP BY by hand.

    python benchmarks/archive_funnel.py [--rows 10000000] [--spans 10000,100000,1000000]

For each shard layout (the sink's span = max_rows_per_shard) the journal is written exactly as
the sink would write it: per topic partition, in offset order, one span at a time, through
credence.sinks.shards.write_table. Events are time-ordered in offset (a live stream), spread
over many tenants and days. Then, in the same run and interleaved, it times
  hand:   a fresh plain DuckDB connection + the funnel GROUP BY over read_parquet(glob, hive)
  ours:   funnel() on a connection from credence.sinks.analytics.connect()
  report: report(root) end to end (connect, funnel, text table; no PNG)
and prints medians and the ratios ours/hand, report/hand per layout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from credence.config.archive import ArchiveSettings
from credence.sinks.analytics import connect, funnel, report
from credence.sinks.schema import EVIDENCE, EVIDENCE_SCHEMA
from credence.sinks.shards import open_archive, write_table

START = np.datetime64("2026-01-01T00:00:00", "us")
# (event, to_status, weight): a plausible mix; signals dominate like in the real journal.
EVENTS = [
    ("created", "pending", 20), ("signal", None, 45), ("transition", "confirmed", 10),
    ("transition", "promoted", 5), ("merged", "merged", 3), ("transition", "denied", 7),
    ("archived", "archived", 5), ("mention", None, 5),
]
HAND_SQL = """
SELECT tenant, "date" AS day,
       count(*) FILTER (WHERE event = 'created'), count(*) FILTER (WHERE to_status = 'confirmed'),
       count(*) FILTER (WHERE to_status = 'promoted'), count(*) FILTER (WHERE event = 'merged'),
       count(*) FILTER (WHERE to_status = 'denied'), count(*) FILTER (WHERE event = 'archived')
FROM read_parquet(?, hive_partitioning = true)
GROUP BY tenant, day ORDER BY tenant, day
"""


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64: per-offset pseudo-randomness independent of how offsets are blocked."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def journal_block(partition: int, first: int, stop: int, per_partition: int, tenants: int, days: int) -> pa.Table:
    """Evidence rows for offsets [first, stop) of one topic partition, with key columns."""
    offsets = np.arange(first, stop, dtype=np.int64)
    n = len(offsets)
    with np.errstate(over="ignore"):
        h = mix(offsets.astype(np.uint64) + (np.uint64(partition) << np.uint64(40)))
    tenant = pa.array((h % np.uint64(tenants)).astype(np.int64)).cast(pa.string())
    tenant = pc.binary_join_element_wise("tenant-", tenant, "")
    kind = pc.if_else(pa.array((h >> np.uint64(8)) % np.uint64(2) == 0), "reflection", "persona")
    weights = np.array([w for *_, w in EVENTS])
    pick = np.searchsorted(np.cumsum(weights), (h >> np.uint64(16)) % np.uint64(weights.sum()), side="right")
    event = pa.array(np.array([e for e, _, _ in EVENTS], dtype=object)[pick], pa.string())
    to_status = pa.array(np.array([s for _, s, _ in EVENTS], dtype=object)[pick], pa.string())
    span_us = days * 86_400_000_000
    at_us = (offsets * (span_us // max(per_partition, 1))) + ((h >> np.uint64(24)) % np.uint64(60_000_000)).astype(np.int64)
    at = pa.array(START + at_us.astype("timedelta64[us]")).cast(pa.timestamp("us", tz="UTC"))
    day = pc.strftime(at, format="%Y-%m-%d")
    user = pc.binary_join_element_wise("user-", pa.array((h >> np.uint64(32)) % np.uint64(500)).cast(pa.string()), "")
    entry_id = pc.binary_join_element_wise(f"p{partition}-", pa.array(offsets // 4).cast(pa.string()), "")
    snapshot = pc.binary_join_element_wise(
        '{"id":"', entry_id, '","kind":"', kind, '","status":"', pc.fill_null(to_status, "pending"),
        '","tenant":"', tenant, '","user":"', user, '","version":1}', "")
    columns = {
        "v": pa.array(np.ones(n, np.int16)), "user": user, "character": pa.array(["char"] * n, pa.string()),
        "entry_id": entry_id, "entry_kind": kind, "event_id": pc.binary_join_element_wise(entry_id, "@1", ""),
        "event": event, "cause": pa.nulls(n, pa.string()), "from_status": pa.nulls(n, pa.string()),
        "to_status": to_status, "at": at, "score": pa.array((h % np.uint64(400)).astype(np.float64) / 100 - 2),
        "tier": pa.nulls(n, pa.string()), "status": pc.fill_null(to_status, "pending"),
        "version": pa.array(np.ones(n, np.int64)), "updated_at": at, "snapshot_json": snapshot,
        "topic_partition": pa.array(np.full(n, partition, np.int32)), "offset": pa.array(offsets),
    }
    arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in EVIDENCE_SCHEMA]
    table = pa.Table.from_arrays(arrays, schema=EVIDENCE_SCHEMA)
    return table.append_column("tenant", tenant).append_column("kind", kind).append_column("date", day)


def write_layout(root: Path, span: int, rows: int, partitions: int, tenants: int, days: int) -> tuple[int, float]:
    """Write the journal as the sink would with max_rows_per_shard = span; return (files, seconds)."""
    settings = ArchiveSettings(root=str(root), max_rows_per_shard=span)
    archive = open_archive(str(root))
    per_partition = rows // partitions
    files = 0
    t0 = time.perf_counter()
    for p in range(partitions):
        for first in range(0, per_partition, span):
            block = journal_block(p, first, min(first + span, per_partition), per_partition, tenants, days)
            files += len(write_table(archive, EVIDENCE, p, block, settings, range_last=first + span - 1))
    return files, time.perf_counter() - t0


def time_hand(root: Path) -> tuple[float, list]:
    t0 = time.perf_counter()
    conn = duckdb.connect()
    conn.execute("SET TimeZone = 'UTC'")
    rows = conn.execute(HAND_SQL, [f"{root}/evidence/**/*.parquet"]).fetchall()
    conn.close()
    return time.perf_counter() - t0, rows


def time_ours(conn: duckdb.DuckDBPyConnection) -> tuple[float, list]:
    t0 = time.perf_counter()
    rows = funnel(conn)
    return time.perf_counter() - t0, [(r.tenant, r.day, r.created, r.confirmed, r.promoted, r.merged,
                                       r.denied, r.archived) for r in rows]


def time_report(root: Path) -> float:
    t0 = time.perf_counter()
    report(str(root))
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--tenants", type=int, default=8)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--spans", default="10000,100000,1000000", help="rows-per-shard settings to compare")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per variant (median reported)")
    parser.add_argument("--root", help="work folder (default: a temp folder, removed afterwards)")
    args = parser.parse_args(argv)
    spans = [int(s) for s in args.spans.split(",")]
    work = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="credence-bench-"))
    results = []
    print(f"{args.rows:,} evidence rows, {args.tenants} tenants, {args.days} days, {args.partitions} topic "
          f"partitions; duckdb {duckdb.__version__}, {os.cpu_count()} cpus; median of {args.runs} runs")
    try:
        for span in spans:
            root = work / f"span-{span}"
            shutil.rmtree(root, ignore_errors=True)
            files, write_s = write_layout(root, span, args.rows, args.partitions, args.tenants, args.days)
            conn = connect(str(root))
            hand, ours, rep = [], [], []
            for _ in range(args.runs):  # interleaved, so drift hits every variant alike
                h, hand_rows = time_hand(root)
                o, our_rows = time_ours(conn)
                hand.append(h)
                ours.append(o)
                rep.append(time_report(root))
            conn.close()
            if hand_rows != our_rows:
                sys.exit(f"span {span}: funnel() and the hand-written query disagree")
            result = {"span": span, "files": files, "rows_per_shard": args.rows / max(files, 1),
                      "write_s": write_s, "hand_s": statistics.median(hand), "ours_s": statistics.median(ours),
                      "report_s": statistics.median(rep), "funnel_rows": len(our_rows)}
            result["ours_ratio"] = result["ours_s"] / result["hand_s"]
            result["report_ratio"] = result["report_s"] / result["hand_s"]
            results.append(result)
            print(f"max_rows_per_shard={span:>9,}: {files:>6,} shards, {result['rows_per_shard']:>9,.0f} rows/shard, "
                  f"write {write_s:6.1f}s | hand {result['hand_s']*1000:7.1f} ms | funnel() {result['ours_s']*1000:7.1f} ms "
                  f"(x{result['ours_ratio']:.2f}) | report {result['report_s']*1000:7.1f} ms (x{result['report_ratio']:.2f})",
                  flush=True)
            shutil.rmtree(root, ignore_errors=True)
    finally:
        if not args.root:
            shutil.rmtree(work, ignore_errors=True)
    return results


if __name__ == "__main__":
    main()
