"""A tiny run of benchmarks/corrections.py in process: one labelled dialogue of every kind (corrections and
controls) through the scope step and the rules backend; the corrections stick, carry their new value, and
no control loses a fact. The whole set runs end to end through a worker in `python -m benchmarks`."""

from __future__ import annotations

from benchmarks.corrections import load, run_inprocess, tally


def test_one_dialogue_of_every_kind_meets_the_benchmark_targets():
    first: dict[str, dict] = {}
    for d in load():
        first.setdefault(d["kind"], d)
    assert len(first) >= 15 and sum(d["control"] for d in first.values()) >= 6
    stats = tally(run_inprocess(list(first.values())))
    corrections, controls = stats["all corrections"], stats["all controls"]
    assert corrections.established == corrections.n  # every old value was in the block before its correction
    assert (corrections.stuck, corrections.new) == (corrections.established, corrections.with_new)
    assert controls.false_retractions == 0


def test_the_labelled_set_has_the_promised_size():
    dialogues = load()
    assert sum(not d["control"] for d in dialogues) >= 80 and sum(d["control"] for d in dialogues) >= 30
    assert len({d["id"] for d in dialogues}) == len(dialogues)
