"""Wider Stage-1 windows change how many calls a conversation costs, not what the memory decides: the same
real-style dialogue, extracted one user turn per window or in the default windows, ends with the same facts
and the same entries (rules backend)."""

from __future__ import annotations

import random

from credence.streams.ops.data import generate_dialogue
from credence.tables.clock import parse_instant
from tests.unit.scope.conftest import run_request


def _feed(driver, turns: list[dict]) -> None:
    for t in turns:
        driver.turn(t["text"], parse_instant(t["ts"]), role=t["role"], turn_id=t["turn_id"])
    driver.flush()
    driver.pump()


def _facts(driver) -> set:
    """Every fact the Stage-1 requests extracted (the state keeps facts only until they are processed)."""
    return {(f["text"], f["subject"], f["polarity"], tuple(f["source_turn_ids"]))
            for req in driver.requests_of("stage1") for f in run_request(req)["facts"]}


def _entries(driver) -> set:
    return {(e.kind, e.text, e.status) for e in driver.state.entries.values()}


def test_default_windows_decide_what_per_turn_windows_decide(driver_factory, pipeline_factory):
    for seed in (1, 2, 3):
        turns = generate_dialogue._scope_turns("u1", "aria", random.Random(seed), sessions=6)
        per_turn = driver_factory(pipeline=pipeline_factory(stage1_max_batch=1))
        windowed = driver_factory(pipeline=pipeline_factory())
        _feed(per_turn, turns)
        _feed(windowed, turns)
        assert len(windowed.requests_of("stage1")) < len(per_turn.requests_of("stage1")) / 2
        assert _facts(windowed) == _facts(per_turn) and _facts(per_turn)
        assert _entries(windowed) == _entries(per_turn) and _entries(per_turn)
