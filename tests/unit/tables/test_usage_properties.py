"""Properties of the usage math (hypothesis)."""

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from credence.config.usage import UsageSettings
from credence.tables.usage import Usage, decay_sweep, reinforce, usage_strength

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ON = UsageSettings(decay_enabled=True)
strengths = st.floats(min_value=0.0, max_value=1.0 - 1e-6, allow_nan=False)
ages = st.floats(min_value=0, max_value=3650 * 86400, allow_nan=False).map(lambda s: timedelta(seconds=s))
sources = st.sampled_from(["recall", "search", "api"])


@st.composite
def usages(draw) -> Usage:
    last = draw(st.none() | ages.map(lambda a: T0 - a))
    return Usage(strength=draw(st.none() | st.floats(0, 2, allow_nan=False)),
                 reinforce_count=draw(st.integers(0, 50)), last_reinforced_at=last,
                 since=draw(st.none() | ages.map(lambda a: T0 - a)))


@given(strengths, st.integers(1, 40))
def test_daily_impulses_from_any_start_strictly_increase_and_stay_below_the_ceiling(start, days):
    u = Usage(strength=start, last_reinforced_at=T0)
    previous = start
    for day in range(1, days + 1):
        # one hit a day, each inside the grace of the last: no decay in between
        u = reinforce(u, T0 + timedelta(days=day), "recall")
        assert previous < u.strength < 1.0
        previous = u.strength


@given(usages(), ages, sources)
def test_reinforce_never_passes_the_ceiling_and_a_repeat_is_a_no_op(u, age, source):
    at = T0 + age
    once = reinforce(u, at, source)
    assert once.strength <= max(1.0, usage_strength(u, at))
    assert reinforce(once, at, source) is once


@given(usages(), ages, ages)
def test_strength_never_rises_with_time_and_never_falls_under_the_floor_from_above(u, a, b):
    early, late = sorted((a, b))
    s_early, s_late = usage_strength(u, T0 + early), usage_strength(u, T0 + late)
    assert s_late <= s_early
    start = 0.5 if u.strength is None else u.strength
    assert s_late >= min(0.1, start)


@given(usages(), ages, st.none() | st.floats(0, 1, allow_nan=False))
def test_the_gate_off_never_archives_and_the_sweep_never_changes_the_usage(u, age, consensus):
    assert decay_sweep(u, T0 + age, consensus_score=consensus) == (u, False)
    assert decay_sweep(u, T0 + age, consensus_score=consensus, settings=ON)[0] is u


@given(usages())
def test_round_trip(u):
    assert Usage.from_dict(u.to_dict()) == u
