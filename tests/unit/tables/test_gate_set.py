"""The self-containment gate against the labelled gate set (benchmarks/gate_set.jsonl): statements a
model or the rules backend could write, half of them from human-style dialogue (dashes, run-ons, "lol",
lowercase names, several speakers), each labelled usable or unusable by a reader. The floors are the
issue's: at least 95% of unusable statements refused, at most 2% of usable ones."""

from __future__ import annotations

import json
from pathlib import Path

from credence.tables.statement import REASONS, is_self_contained

GATE_SET = Path(__file__).resolve().parents[3] / "benchmarks" / "gate_set.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in GATE_SET.read_text().splitlines() if line.strip()]


def test_the_set_is_large_labelled_and_half_from_dialogue():
    rows = _rows()
    assert len(rows) >= 300
    assert sum(r["source"] == "dialogue" for r in rows) >= len(rows) / 2
    assert {r["label"] for r in rows} == {"usable", "unusable"}
    assert all(r["reason"] in REASONS for r in rows if r["label"] == "unusable")
    assert {r["lang"] for r in rows} >= {"en", "de", "es", "fr"}


def test_the_gate_refuses_unusable_statements_and_keeps_usable_ones():
    rows = _rows()
    usable = [r["text"] for r in rows if r["label"] == "usable"]
    unusable = [r["text"] for r in rows if r["label"] == "unusable"]
    refused_usable = [t for t in usable if not is_self_contained(t)[0]]
    passed_unusable = [t for t in unusable if is_self_contained(t)[0]]
    assert len(passed_unusable) <= 0.05 * len(unusable), passed_unusable
    assert len(refused_usable) <= 0.02 * len(usable), refused_usable


def test_the_benchmark_scores_refusals_and_counts_an_unjudged_entry_as_not_self_contained():
    from benchmarks.gate import dialogue_scores, gate_scores

    rows = [{"text": "The user likes tea.", "label": "usable"}, {"text": "The user likes it.", "label": "unusable"},
            {"text": "The user knows that.", "label": "unusable"}, {"text": "The user loves him.", "label": "usable"}]
    s = gate_scores(rows)  # the last label is wrong on purpose: a refusal of a "usable" statement
    assert (s["recall"], s["precision"], s["usable_refused"]) == (1.0, 2 / 3, 0.5)
    demo = ["== t/u/c: 3 turns, 2 entries (clock x)",
            "  reflection pending    hot                 +0.500  The user lives in Glasgow.",
            "  reflection pending    hot                 +0.500  The user hums a tune nobody judged."]
    d = dialogue_scores(demo)
    assert (d["entries"], d["judged_self_contained"], d["unjudged"]) == (
        2, 1, ["The user hums a tune nobody judged."])
