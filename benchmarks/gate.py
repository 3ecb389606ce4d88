"""The self-containment gate on real speech: how well tables.statement.is_self_contained tells usable
statements from unusable ones, and what the offline default stores from human-style talk.

1. The labelled gate set (benchmarks/gate_set.jsonl): recall and precision of refusing unusable statements,
   and the share of usable ones refused.
2. A realistic dialogue (benchmarks/gate_dialogue.jsonl) replayed through `credence demo`: stored entries,
   the share a reader judged self-contained, near-duplicate live pairs.
The method in full: docs/design/benchmarks.md ("The self-containment gate on real speech").

    python benchmarks/gate.py [--sample 30]      # both parts, on CREDENCE_KAFKA_BOOTSTRAP or an embedded broker
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.report import Row, kafka_and_folder  # noqa: E402

GATE_SET = HERE / "gate_set.jsonl"
DIALOGUE = HERE / "gate_dialogue.jsonl"
JUDGED = HERE / "gate_dialogue_judged.jsonl"
# The lexical gate and rules extraction before the referent gate (main at 7b6a919), same files, 2026-12-05.
BEFORE = {"all": "before the referent gate: recall 52.1%, precision 95.2%, usable refused 2.5%",
          "from dialogue": "before the referent gate: recall 49.4%, precision 100%, usable refused 0%",
          "dialogue": "before the referent gate: 75 of 89 stored entries (84.3%) judged self-contained, "
                      "0 near-duplicate pairs"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def gate_scores(rows: list[dict]) -> dict:
    """Precision and recall of the gate's refusals on labelled rows, and the share of usable ones refused."""
    from credence.tables.statement import is_self_contained

    refused = [(r, not is_self_contained(r["text"])[0]) for r in rows]
    hits = sum(1 for r, no in refused if no and r["label"] == "unusable")
    unusable = sum(1 for r in rows if r["label"] == "unusable")
    usable = len(rows) - unusable
    wrong = [r["text"] for r, no in refused if no and r["label"] == "usable"]
    missed = [r["text"] for r, no in refused if not no and r["label"] == "unusable"]
    return {"statements": len(rows), "usable": usable, "unusable": unusable,
            "recall": hits / unusable if unusable else float("nan"),
            "precision": hits / (hits + len(wrong)) if hits + len(wrong) else float("nan"),
            "usable_refused": len(wrong) / usable if usable else float("nan"),
            "false_refusals": wrong, "missed": missed}


def replay(bootstrap: str, input_path: Path = DIALOGUE) -> list[str]:
    """`credence demo --input` on the given broker: the summary lines it prints."""
    from credence.config import load_settings
    from credence.streams.ops.demo import run_demo

    lines: list[str] = []
    settings = load_settings().model_copy(update={"kafka_bootstrap": bootstrap})
    run_demo(settings, input_path, out=lambda s="": lines.extend(str(s).splitlines()))
    return lines


def dialogue_scores(lines: list[str], sample: int = 30) -> dict:
    from credence.streams.ops.data.generate_dialogue import score

    scored = score(lines, sample=10_000)
    texts = [s.split(": ", 1)[1] for s in scored["sample"]]
    judged = {r["text"]: r["usable"] for r in _jsonl(JUDGED)} if JUDGED.exists() else {}
    unjudged = sorted({t for t in texts if t not in judged})
    good = sum(1 for t in texts if judged.get(t) is True)
    return {"entries": scored["entries"], "gate_passed": scored["self_contained"],
            "judged_self_contained": good, "unjudged": unjudged,
            "judged_unusable": sorted({t for t in texts if judged.get(t) is False}),
            "near_duplicate_pairs": scored["near_duplicate_pairs"],
            "sample": random.Random(0).sample(scored["sample"], min(sample, len(scored["sample"])))}


def report_rows(quick: bool, bootstrap: str, work: Path) -> list[Row]:
    rows = _jsonl(GATE_SET)
    out = []
    for name, subset in (("all", rows), ("from dialogue", [r for r in rows if r["source"] == "dialogue"])):
        s = gate_scores(subset)
        note = f"{s['statements']} statements ({s['unusable']} unusable); {BEFORE[name]}"
        out += [Row("self-containment gate", f"recall: unusable refused, {name}", s["recall"], target=">= 95%",
                    note=note),
                Row("self-containment gate", f"precision of refusals, {name}", s["precision"], note=note),
                Row("self-containment gate", f"usable statements refused, {name}", s["usable_refused"],
                    target="<= 2%", note=note)]
    d = dialogue_scores(replay(bootstrap))
    share = d["judged_self_contained"] / d["entries"] if d["entries"] else float("nan")
    out += [Row("self-containment gate", "realistic dialogue: stored entries judged self-contained", share,
                target=">= 95%", note=f"{d['entries']} entries, {len(d['unjudged'])} unjudged (counted as not); "
                                      f"{BEFORE['dialogue']}"),
            Row("self-containment gate", "realistic dialogue: near-duplicate live pairs",
                float(len(d["near_duplicate_pairs"])), target="<= 0", unit="pairs")]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=30, help="stored entries to print")
    parser.add_argument("--input", type=Path, default=DIALOGUE)
    args = parser.parse_args(argv)
    s = gate_scores(_jsonl(GATE_SET))
    print(f"gate set: {s['statements']} statements; recall {s['recall']:.1%}, precision {s['precision']:.1%}, "
          f"usable refused {s['usable_refused']:.1%}")
    for text in s["missed"]:
        print(f"  passed but unusable: {text}")
    for text in s["false_refusals"]:
        print(f"  refused but usable:  {text}")
    from credence.config import load_settings

    with kafka_and_folder(load_settings()) as (bootstrap, _work):
        d = dialogue_scores(replay(bootstrap, args.input), args.sample)
    print(f"dialogue: {d['entries']} stored entries, {d['gate_passed']} pass the gate, "
          f"{d['judged_self_contained']} judged self-contained, {len(d['near_duplicate_pairs'])} near-duplicate pairs")
    for label, texts in (("unjudged", d["unjudged"]), ("judged unusable", d["judged_unusable"])):
        for text in texts:
            print(f"  {label}: {text}")
    print(f"sample of {len(d['sample'])}:")
    for line in d["sample"]:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
