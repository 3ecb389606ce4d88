"""A user's denial of a reflection whose promotion is in flight wins, whatever the order of the results
that follow it on the scope's partition (the seed: a late promotion result never overwrites a denial)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.streams.scope.requests import reflection_id
from credence.streams.scope.scope_state import ScopeState

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
HIKING = reflection_id(SCOPE, "The user loves hiking.")
MIN = timedelta(minutes=1)
OUTCOMES = {
    "create": {"decision": {"action": "create", "target_id": None, "text": "The user loves hiking."}},
    "merge": {"decision": {"action": "merge", "target_id": "p-hike", "text": "The user hikes."}},
    "reject": {"decision": {"action": "reject", "target_id": None, "text": ""}},
}
RACES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def deny_by(d, how: str, at: datetime) -> None:
    if how == "explicit":
        d.feedback(HIKING, "deny", at, feedback_id="fb-deny")
        return
    d.turn("You love hiking, as always.", at - MIN / 2, role="ai", surfaced_ids=[HIKING])
    if how == "keyword":
        d.turn("Anyway, what else?", at - MIN / 4, role="ai")  # the reply is no longer a surfaced one
        d.turn("No, I never said I love hiking", at)
    else:
        d.turn("No, that's wrong.", at)


def race(driver_factory, how: str, outcome: str, position: int, busy: bool, duplicate: bool, restart: bool):
    d = driver_factory()
    d.turn("I love hiking", T0)
    d.flush()
    d.feedback(HIKING, "confirm", T0 + MIN)
    if outcome == "merge":
        from credence.tables.entries import new_persona_entry
        from credence.tables.scope import Scope
        p = new_persona_entry("p-hike", Scope("acme", "u1", "aria"), "The user hikes.", T0, subject="hiking")
        d.state.entries[p.id] = p
    d.auto = False
    d.feedback(HIKING, "confirm", T0 + 2 * MIN, feedback_id="fb2")
    (promotion,) = [r for r in d.outbox if r.task == "promotion"]
    d.outbox.remove(promotion)
    if busy:  # another evidence request holds the scope when the denial arrives
        d.turn("I like tea", T0 + 2 * MIN + timedelta(seconds=1))
        d.flush()
    deny_by(d, how, T0 + 4 * MIN)
    if restart:  # SIGKILL: the state comes back from its stored form, in-flight calls are re-issued
        d.state = ScopeState.from_dict(d.state.to_dict())
        d.boot = "boot-2"
        d.outbox.clear()
        d.tick(T0 + 4 * MIN)
        d.outbox = [r for r in d.outbox if r.task != "promotion"]
    delivered, i = 0, 0
    while d.outbox or delivered < 1 + duplicate:
        if (i >= position or not d.outbox) and delivered < 1 + duplicate:
            if outcome == "failed":
                d.fail(promotion)
            else:
                d.result(promotion, OUTCOMES[outcome])
            delivered += 1
        elif d.outbox:
            d.pump_one()
        i += 1
    d.auto = True
    d.pump()
    return d


@RACES
@given(how=st.sampled_from(["explicit", "surfaced", "keyword"]),
       outcome=st.sampled_from(["create", "merge", "reject", "failed"]),
       position=st.integers(0, 6), busy=st.booleans(), duplicate=st.booleans(), restart=st.booleans())
def test_any_interleaving_of_a_denial_with_a_promotion_result_ends_denied(driver_factory, how, outcome, position,
                                                                          busy, duplicate, restart):
    d = race(driver_factory, how, outcome, position, busy, duplicate, restart)
    hiking = d.state.entries[HIKING]
    assert hiking.status == "denied" and hiking.merged_into_id is None
    assert [e.id for e in d.personas()] == (["p-hike"] if outcome == "merge" else [])
    if outcome == "merge":
        assert d.state.entries["p-hike"].merged_from_ids == ()
    assert [j for j in d.journal() if j["event"] == "merged" or j["to_status"] == "promoted"] == []
    assert not any(r.task == "promotion" for r in d.state.requests.values()) and d.state.queue == []


@RACES
@given(how=st.sampled_from(["explicit", "surfaced", "keyword"]), position=st.integers(0, 6), busy=st.booleans())
def test_the_outcome_is_the_same_whatever_the_position(driver_factory, how, position, busy):
    """Deterministic: the journal and the entries do not depend on where the late result landed."""
    first = race(driver_factory, how, "create", 0, busy, False, False)
    later = race(driver_factory, how, "create", position, busy, False, False)
    assert first.state.entries == later.state.entries
