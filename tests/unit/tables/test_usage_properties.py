"""Properties of the usage math (hypothesis)."""

from datetime import UTC, date, datetime, timedelta

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
                 since=draw(st.none() | ages.map(lambda a: T0 - a)),
                 reinforced=tuple(draw(st.lists(st.tuples(st.dates(max_value=date(2026, 1, 31)), sources),
                                                max_size=4))))


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


# days inside the default 28-day horizon of one another
hits = st.lists(st.tuples(st.integers(0, 25), st.integers(0, 86399), sources), max_size=25)


@given(hits, st.randoms(use_true_random=False))
def test_the_same_hits_in_any_order_count_once_per_source_and_day(hit_list, rng):
    """Within the idempotency horizon, order never changes which hits count; a duplicate never counts."""
    def impulses_per_day(order):
        u, counted = Usage(strength=0.0, since=T0), {}
        for day, second, source in order:
            at = T0 + timedelta(days=day, seconds=second)
            after = reinforce(u, at, source)
            if after is not u:
                counted[at.date()] = counted.get(at.date(), 0) + 1
            u = after
        # a replay of everything (every record delivered again) changes nothing
        for day, second, source in order:
            assert reinforce(u, T0 + timedelta(days=day, seconds=second), source) is u
        return counted, u

    shuffled = list(hit_list)
    rng.shuffle(shuffled)
    (first, u1), (second, u2) = impulses_per_day(hit_list), impulses_per_day(shuffled)
    expected: dict = {}
    for day, source in {((T0 + timedelta(days=d, seconds=sec)).date(), src) for d, sec, src in hit_list}:
        expected[day] = expected.get(day, 0) + 1
    assert first == second == expected
    assert u1.reinforce_count == u2.reinforce_count == sum(expected.values())
    assert u1.reinforced == u2.reinforced
