"""The score-transition pass re-checks only changed reflections while the clock stands still (a recall's
usage records), and across time only those time itself can move: that shortcut must never change what a
step does. Two scopes get the same inputs; one forgets its `quiet` marks before every step; states and
effects stay equal."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import new_reflection
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope
from tests.unit.scope.conftest import SCOPE_KEY, T0, Driver

IDS = [f"r-{i}" for i in range(6)]
# Minutes after T0: often the same instant (the instant marks), and days to weeks later (the marks that
# hold while the clock moves on, which must never hide a reflection time itself confirms or promotes).
INPUT = st.tuples(st.sampled_from(["confirm", "deny", "usage", "ai"]), st.sampled_from(IDS),
                  st.sampled_from([0, 0, 0, 1, 30, 180, 3 * 1440, 20 * 1440, 45 * 1440]))


def scope_with_reflections() -> ScopeState:
    state = ScopeState(scope=SCOPE_KEY, clock=T0, last_sweep_at=T0)
    for i, eid in enumerate(IDS):
        entry = new_reflection(eid, Scope.parse(SCOPE_KEY), f"The user likes topic {i}.", T0 - timedelta(days=1))
        state.entries[eid] = replace(entry, evidence=Evidence(reinforcement=0.4 * i, rein_last_signal_at=T0))
    return state


def feed(driver: Driver, inputs, forget: bool) -> None:
    for n, (kind, eid, minutes) in enumerate(inputs):
        if forget:
            driver.state.quiet = {}
        at = T0 + timedelta(minutes=minutes)
        if kind == "ai":  # names the entry lexically: the mention index's candidates (quiet.mention_candidates)
            driver.turn(f"So you like topic {IDS.index(eid)}, right?", at, role="ai")
        elif kind == "usage":
            driver.step("usage", {"v": 1, "tenant": "acme", "user": "u1", "character": "aria",
                                  "entry_ids": [eid], "source": "recall", "ts": at.isoformat()}, at)
        else:
            driver.feedback(eid, kind, at, feedback_id=f"fb{n}")


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])  # a factory: fresh per call
@given(st.lists(INPUT, min_size=1, max_size=14))
def test_the_quiet_marks_never_change_a_step(driver_factory, inputs):
    marked = driver_factory(state=scope_with_reflections())
    fresh = driver_factory(state=scope_with_reflections(), memory=marked.memory, pipeline=marked.pipeline)
    feed(marked, inputs, forget=False)
    feed(fresh, inputs, forget=True)
    assert marked.state.to_dict() == fresh.state.to_dict()
    assert [e.record for e in marked.emits] == [e.record for e in fresh.emits]
    assert [(r.task, r.payload) for r in marked.issued] == [(r.task, r.payload) for r in fresh.issued]
