"""Properties of the evidence math (hypothesis)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from credence.tables.entries import Entry, apply_snapshot, new_reflection
from credence.tables.evidence import SIGNAL_KINDS, Evidence, apply_signal, decayed, evidence_score, sweep
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

counters = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
non_negative = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
offsets = st.floats(min_value=-3650, max_value=3650, allow_nan=False).map(lambda d: timedelta(days=d))
clocks = st.none() | offsets.map(lambda delta: T0 + delta)
instants = st.floats(min_value=0, max_value=3650, allow_nan=False).map(lambda d: T0 + timedelta(days=d))


@st.composite
def evidence(draw) -> Evidence:
    return Evidence(
        reinforcement=draw(counters),
        disputation=draw(non_negative),
        rein_last_signal_at=draw(clocks),
        disp_last_signal_at=draw(clocks),
        sub_zero_days=draw(st.integers(0, 30)),
        user_fact_reinforce_count=draw(st.integers(0, 10)),
    )


@given(evidence(), non_negative, instants)
def test_score_is_monotone_non_decreasing_in_reinforcement(ev, extra, now):
    more = replace(ev, reinforcement=ev.reinforcement + extra)
    assert evidence_score(more, now) >= evidence_score(ev, now)


@given(evidence(), non_negative, instants)
def test_score_is_monotone_non_increasing_in_disputation(ev, extra, now):
    more = replace(ev, disputation=ev.disputation + extra)
    assert evidence_score(more, now) <= evidence_score(ev, now)


@given(counters, clocks, instants, st.sampled_from([30.0, 180.0]))
def test_decay_never_changes_sign_and_never_grows(counter, clock, now, half_life):
    value = decayed(counter, clock, now, half_life)
    assert (value > 0) == (counter > 0) or value == 0.0
    assert (value < 0) == (counter < 0) or value == 0.0
    assert abs(value) <= abs(counter)


@given(evidence(), instants, instants)
def test_score_never_rises_with_time_for_non_negative_counters(ev, first, second):
    ev = replace(ev, reinforcement=abs(ev.reinforcement), disputation=0.0)
    early, late = sorted((first, second))
    assert evidence_score(ev, late) <= evidence_score(ev, early)


@given(evidence(), st.sampled_from(sorted(SIGNAL_KINDS)), instants)
def test_clocks_are_independent(ev, kind, at):
    after = apply_signal(ev, kind, at)
    touched_rein = after.rein_last_signal_at != ev.rein_last_signal_at
    touched_disp = after.disp_last_signal_at != ev.disp_last_signal_at
    assert not (touched_rein and touched_disp)
    if kind in {"user_fact_negate", "user_deny", "negative_keyword"}:
        assert after.rein_last_signal_at == ev.rein_last_signal_at and after.reinforcement == ev.reinforcement
    else:
        assert after.disp_last_signal_at == ev.disp_last_signal_at and after.disputation == ev.disputation


@given(evidence(), st.sampled_from(sorted(SIGNAL_KINDS)), instants)
def test_disputation_never_negative_and_counter_never_falls(ev, kind, at):
    after = apply_signal(ev, kind, at)
    assert after.disputation >= 0
    assert after.user_fact_reinforce_count >= ev.user_fact_reinforce_count


@given(evidence())
def test_snapshot_round_trip_is_exact(ev):
    assert Evidence.from_dict(ev.to_dict()) == ev
    assert Evidence.from_dict(Evidence.from_dict(ev.to_dict()).to_dict()) == ev


@given(evidence(), st.integers(1, 50), st.integers(1, 50))
def test_applying_the_same_snapshot_twice_is_a_no_op(ev, current_version, snapshot_version):
    base = new_reflection("r1", Scope("t", "u", "c"), "likes tea", T0)
    current = replace(base, version=current_version)
    snapshot = Entry.from_dict(replace(base, evidence=ev, version=snapshot_version).to_dict())
    once = apply_snapshot(current, snapshot)
    assert apply_snapshot(once, snapshot) == once
    assert once.version == max(current_version, snapshot_version)


@given(evidence(), instants)
def test_sweep_is_idempotent_within_a_day(ev, now):
    once, archive_once = sweep(ev, now)
    twice, archive_twice = sweep(once, now)
    assert twice == once and archive_twice == archive_once
    assert once.sub_zero_days >= ev.sub_zero_days
