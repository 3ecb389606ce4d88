"""What benchmarks/throughput.py's measurements become: each input's runs summarised (medians and paired
ratios), the table it prints, and the rows of the one benchmark report (benchmarks/report.py)."""

from __future__ import annotations

import statistics

from benchmarks.report import Row
from credence.streams.runtime.topics import STATE_TABLES


def summarize(rows: dict, turns: int) -> dict:
    pairs = list(zip(rows["raw"], rows["ours"]))
    fenced = [(o["turns"] / o["seconds"]) / (u["turns"] / u["seconds"]) for o, u in zip(rows["ours"], rows["unfenced"])]
    return {
        "turns": turns,
        "raw_turns_s": statistics.median(r["turns"] / r["seconds"] for r in rows["raw"]),
        "ours_turns_s": statistics.median(o["turns"] / o["seconds"] for o in rows["ours"]),
        "ratio": statistics.median((o["turns"] / o["seconds"]) / (r["turns"] / r["seconds"]) for r, o in pairs),
        "unfenced_turns_s": statistics.median(u["turns"] / u["seconds"] for u in rows["unfenced"]),
        "fenced_ratios": fenced,
        "fenced_ratio": statistics.median(fenced),
        "changelog_bytes_per_turn": statistics.median(sum(o["changelog_bytes"].values()) / o["turns"]
                                                      for o in rows["ours"]),
        "changelog_bytes_per_turn_by_table": {t: statistics.median(o["changelog_bytes"][t] / o["turns"]
                                                                   for o in rows["ours"]) for t in STATE_TABLES},
        "ours_cpu_s_per_1k": statistics.median(1000 * o["cpu_s"] / o["turns"] for o in rows["ours"]),
        "raw_cpu_s_per_1k": statistics.median(1000 * r["cpu_s"] / r["turns"] for r in rows["raw"]),
        "journal_events": rows["ours"][-1]["journal_events"],
        "runs": {"raw": rows["raw"], "ours": rows["ours"], "unfenced": rows["unfenced"]},
    }


def rows(report: dict) -> list[Row]:
    """The report's rows for `python -m benchmarks`."""
    rows = []
    for name, m in report["inputs"].items():
        label = "bare aiokafka consume -> decode -> encode -> produce"
        rows.append(Row("throughput", f"{name} scopes: turns/s", m["ours_turns_s"], m["raw_turns_s"], unit="turns/s",
                        baseline_label=label, target="ratio >= 0.05" if name == "long" else "",
                        note=f"{m['turns']} turns, {report['runs']} interleaved runs (medians), rules backend"))
        rows.append(Row("throughput", f"{name} scopes: turns/s, transactions on (fencing)", m["ours_turns_s"],
                        m["unfenced_turns_s"], unit="turns/s", baseline_label="transactions off",
                        ratio=m["fenced_ratio"],
                        note="the worker with CREDENCE_STATE__TRANSACTIONS on and off, runs interleaved; ratio: the "
                             "median of the pairs' ratios (" + ", ".join(f"{r:.2f}" for r in m["fenced_ratios"]) + ")"))
        if m["changelog_bytes_per_turn"]:
            rows.append(Row("throughput", f"{name} scopes: changelog bytes per turn", m["changelog_bytes_per_turn"],
                            unit="B", target="<= 2048"))
    lat, off = report["latency"], report["latency_unfenced"]
    if lat.get("turns_measured"):
        for q in ("p50", "p99"):
            rows.append(Row("throughput", f"turn -> journal event {q} at half the long rate", lat[f"{q}_ms"],
                            off.get(f"{q}_ms"), unit="ms", baseline_label="transactions off",
                            note="one run each, transactions on then off, at the same rate"))
    for r in report["per_record"]:
        rows.append(Row("per-record cost", f"CPU per turn at {r['entries']:,} entries", r["cpu_ms_per_turn"],
                        report["per_record"][0]["cpu_ms_per_turn"], unit="ms", baseline_label="at 10 entries",
                        target="ratio <= 1.25" if r["entries"] == 10_000 else "",
                        note="after the scope's first two records, which load it (next row)"))
    for r in report["per_record"]:
        rows.append(Row("per-record cost", f"CPU of the scope's first two records at {r['entries']:,} entries "
                        "(loading it: decoding every entry, building its indexes)", r["load_cpu_ms"],
                        report["per_record"][0]["load_cpu_ms"], unit="ms", baseline_label="at 10 entries"))
    rec = report["recovery"]
    rows.append(Row("recovery", f"{rec['entries']:,} entries, local store deleted: changelogs read and applied",
                    rec["ours_read_s"], rec["bare_read_s"], unit="s",
                    baseline_label="bare consumer reading the same changelogs", target="ratio <= 2",
                    note=f"{rec['changelog_records']:,} changelog records, medians of {len(rec['rounds'])} interleaved "
                         "rounds; ours: the worker's bulk restore, its consumer's start to the last record applied; "
                         "ratio <= 2 is >= 50% of the bare read's speed"))
    rows.append(Row("recovery", f"{rec['entries']:,} entries, local store deleted: process launch to ready",
                    rec["ours_s"], rec["bare_s"], unit="s", baseline_label="bare consumer process, launch to exit",
                    note="ours also starts Faust, joins the consumer group and replays the last batch's redo"))
    return rows




def print_report(report: dict) -> None:
    print(f"\n{report['partitions']} partitions, ~{report['turn_bytes']:.0f}-byte turns, {report['runs']} "
          f"interleaved runs (medians)")
    print(f"{'input':<6} {'turns':>6} {'raw/s':>9} {'ours/s':>8} {'ours/raw':>9} {'changelog B/turn':>17} "
          f"{'CPU s/1k ours':>14} {'CPU s/1k raw':>13} {'txn off/s':>10} {'on/off':>7}")
    for name, m in report["inputs"].items():
        print(f"{name:<6} {m['turns']:>6} {m['raw_turns_s']:>9.0f} {m['ours_turns_s']:>8.0f} {m['ratio']:>9.1%} "
              f"{m['changelog_bytes_per_turn']:>17.0f} {m['ours_cpu_s_per_1k']:>14.2f} {m['raw_cpu_s_per_1k']:>13.2f} "
              f"{m['unfenced_turns_s']:>10.0f} {m['fenced_ratio']:>7.2f}")
    for name, lat in (("", report["latency"]), (", transactions off", report["latency_unfenced"])):
        if lat.get("turns_measured"):
            print(f"turn -> journal event at {lat['rate']:.0f} turns/s{name}: p50 {lat['p50_ms']:.0f} ms, "
                  f"p99 {lat['p99_ms']:.0f} ms ({lat['turns_measured']} turns)")
    for row in report["per_record"]:
        print(f"per record at {row['entries']:>6} entries/scope: {row['cpu_ms_per_turn']:.2f} ms CPU/turn "
              f"({row['vs_10']:.2f}x of 10), {row['wall_ms_per_turn']:.2f} ms wall/turn; "
              f"loading the scope {row['load_cpu_ms']:.0f} ms CPU")
    rec = report["recovery"]
    print(f"recovery of {rec['entries']} entries ({rec['changelog_records']} changelog records), store deleted: "
          f"read {rec['ours_read_s']:.2f} s vs bare {rec['bare_read_s']:.2f} s -> {rec['read_share_of_bare']:.0%} "
          f"of bare; launch to ready {rec['ours_s']:.1f} s vs bare process {rec['bare_s']:.1f} s "
          f"(medians of {len(rec['rounds'])} rounds: reads " + ", ".join(
              f"{r['ours_read_s']:.2f}/{r['bare_read_s']:.2f}" for r in rec["rounds"]) + " s)")
