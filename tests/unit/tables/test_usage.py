"""Usage strength: impulses, daily idempotency, grace/half-life/floor, the gated sweep."""

from datetime import UTC, date, datetime, time, timedelta

import pytest

from credence.config.settings import load_settings
from credence.config.usage import DEFAULT_USAGE_SETTINGS, UsageSettings
from credence.errors import ConfigError, DomainError
from credence.tables.usage import Usage, decay_sweep, reinforce, restored, sweep_instants, usage_strength

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ON = UsageSettings(decay_enabled=True)
GRACE = timedelta(days=3)
HALF = timedelta(weeks=4)


def test_defaults_are_the_seed_numbers():
    s = DEFAULT_USAGE_SETTINGS
    assert (s.reinforce_alpha, s.reinforce_ceiling) == (0.15, 1.0)
    assert (s.decay_half_life_days, s.decay_grace_days, s.decay_floor) == (28, 3, 0.1)
    assert (s.soft_archive_below, s.consensus_skip_at, s.decay_sweep_at) == (0.2, 0.75, time(3, 0))
    assert s.decay_enabled is False and s.initial_strength == 0.5


def test_settings_are_one_object_and_overridable_from_the_environment(monkeypatch):
    monkeypatch.setenv("CREDENCE_USAGE__DECAY_ENABLED", "true")
    monkeypatch.setenv("CREDENCE_USAGE__DECAY_SWEEP_AT", "04:30")
    s = load_settings()
    assert s.usage.decay_enabled and s.usage.decay_sweep_at == time(4, 30)
    assert s.bridge.bridge_enabled is False
    monkeypatch.setenv("CREDENCE_USAGE__REINFORCE_ALPHA", "1.5")
    with pytest.raises(ConfigError, match="reinforce_alpha"):
        load_settings()


def test_impulse_sequence_from_zero():
    u = Usage(strength=0.0)
    seen = []
    for day in range(4):
        u = reinforce(u, T0 + timedelta(days=day), "recall")
        seen.append(u.strength)
    assert seen == pytest.approx([0.15, 0.2775, 0.385875, 0.47799375])
    assert u.reinforce_count == 4


def test_a_never_reinforced_usage_has_the_initial_strength():
    assert usage_strength(Usage(), T0) == 0.5
    assert usage_strength(Usage(), T0, settings=UsageSettings(initial_strength=0.3)) == 0.3
    assert reinforce(Usage(), T0, "recall").strength == pytest.approx(0.5 + 0.15 * 0.5)


def test_same_source_same_utc_day_is_applied_once_other_source_and_next_day_apply():
    first = reinforce(Usage(strength=0.0), datetime(2026, 3, 1, 0, 0, tzinfo=UTC), "recall")
    assert reinforce(first, datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC), "recall") is first
    other = reinforce(first, datetime(2026, 3, 1, 23, 0, tzinfo=UTC), "search")
    assert other.reinforce_count == 2 and other.reinforced_sources == ("recall", "search")
    assert reinforce(other, datetime(2026, 3, 1, 23, 30, tzinfo=UTC), "search") is other
    next_day = reinforce(other, datetime(2026, 3, 2, 0, 0, tzinfo=UTC), "recall")
    assert next_day.reinforce_count == 3 and next_day.reinforced_day == date(2026, 3, 2)
    assert next_day.reinforced_sources == ("recall",)


def test_utc_day_not_local_day():
    # 23:30 at UTC-5 is 04:30 UTC of the next day: a different UTC day from 20:00 UTC the day before.
    late = datetime(2026, 3, 1, 20, 0, tzinfo=UTC)
    u = reinforce(Usage(strength=0.0), late, "recall")
    from datetime import timezone
    local = datetime(2026, 3, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert reinforce(u, local, "recall").reinforce_count == 2


def test_a_late_hit_for_an_earlier_day_that_never_counted_counts_once():
    u = reinforce(Usage(strength=0.0), T0 + timedelta(days=2), "recall")
    late = reinforce(u, T0, "recall")  # arrives after day 2's hit; day 0 never counted
    assert late.reinforce_count == 2 and late.strength == pytest.approx(0.2775)
    assert late.last_reinforced_at == T0 + timedelta(days=2)  # counted at the anchor: time never runs back
    assert late.reinforced_day == date(2026, 3, 3) and late.reinforced_sources == ("recall",)
    assert reinforce(late, T0 + timedelta(hours=5), "recall") is late  # the same (source, day) again
    assert reinforce(late, T0 + timedelta(hours=5), "search").reinforce_count == 3


def test_counted_days_are_kept_within_the_horizon_only():
    settings = UsageSettings(idempotency_days=7)
    u = Usage(strength=0.0)
    for day in range(30):
        u = reinforce(u, T0 + timedelta(days=day), "recall", settings=settings)
    assert u.reinforce_count == 30
    assert [d for d, _ in u.reinforced] == [date(2026, 3, 24) + timedelta(days=i) for i in range(7)]
    # a day still inside the horizon counted already; a day past it can no longer be told apart: dropped
    assert reinforce(u, T0 + timedelta(days=24), "recall", settings=settings) is u
    assert reinforce(u, T0 + timedelta(days=22), "search", settings=settings) is u
    assert reinforce(u, T0 + timedelta(days=23), "search", settings=settings).reinforce_count == 31


def test_a_same_day_hit_stamped_earlier_counts_at_the_last_reinforcement():
    u = reinforce(Usage(strength=0.0), T0, "recall")
    v = reinforce(u, T0 - timedelta(hours=1), "search")
    assert v.last_reinforced_at == T0 and v.strength == pytest.approx(0.2775)


def test_bad_source_is_refused():
    with pytest.raises(DomainError, match="source"):
        reinforce(Usage(), T0, "")


def test_grace_boundary_to_the_second():
    u = reinforce(Usage(strength=0.0), T0, "recall")  # 0.15 at T0
    assert usage_strength(u, T0 + GRACE) == u.strength
    assert usage_strength(u, T0 + GRACE + timedelta(seconds=1)) < u.strength


def test_half_life_after_the_grace():
    u = Usage(strength=0.8, last_reinforced_at=T0)
    assert usage_strength(u, T0 + GRACE + HALF) == pytest.approx(0.4)
    assert usage_strength(u, T0 + GRACE + 2 * HALF) == pytest.approx(0.2)


def test_floor_boundary_to_the_second():
    u = Usage(strength=0.8, last_reinforced_at=T0)  # 0.8 -> 0.1 takes exactly three half-lives
    at_floor = T0 + GRACE + 3 * HALF
    assert usage_strength(u, at_floor - timedelta(seconds=1)) > 0.1
    assert usage_strength(u, at_floor) == pytest.approx(0.1)
    assert usage_strength(u, at_floor + timedelta(days=3650)) == 0.1


def test_a_strength_already_under_the_floor_stays_where_it_is():
    u = Usage(strength=0.05, last_reinforced_at=T0)
    assert usage_strength(u, T0 + timedelta(days=365)) == 0.05


def test_a_never_recalled_entry_decays_from_its_start():
    u = Usage(since=T0)
    assert usage_strength(u, T0 + GRACE) == 0.5
    assert usage_strength(u, T0 + GRACE + HALF) == pytest.approx(0.25)


def test_soft_archive_threshold():
    u = Usage(strength=0.8, last_reinforced_at=T0)
    at_threshold = T0 + GRACE + 2 * HALF  # exactly 0.2: not below it
    assert decay_sweep(u, at_threshold - timedelta(seconds=1), settings=ON) == (u, False)
    assert decay_sweep(u, at_threshold + timedelta(seconds=1), settings=ON) == (u, True)


def test_consensus_skip():
    u = Usage(strength=0.05, last_reinforced_at=T0)
    later = T0 + timedelta(days=100)
    assert decay_sweep(u, later, consensus_score=0.75, settings=ON) == (u, False)
    assert decay_sweep(u, later, consensus_score=0.7499, settings=ON) == (u, True)
    assert decay_sweep(u, later, consensus_score=None, settings=ON) == (u, True)


def test_gate_off_changes_nothing():
    u = Usage(strength=0.0, last_reinforced_at=T0)
    assert decay_sweep(u, T0 + timedelta(days=1000)) == (u, False)
    assert decay_sweep(u, T0 + timedelta(days=1000))[0] is u


def test_restore_starts_a_new_life_that_survives_the_next_sweep():
    u = Usage(strength=0.8, reinforce_count=3, last_reinforced_at=T0)
    later = T0 + timedelta(days=200)
    assert decay_sweep(u, later, settings=ON)[1]
    back = restored(u, later)
    assert back.reinforce_count == 3 and back.strength == 0.5
    assert decay_sweep(back, later + timedelta(days=1), settings=ON) == (back, False)


def test_round_trip_and_old_snapshots():
    u = reinforce(reinforce(Usage(since=T0), T0, "recall"), T0, "search")
    u = reinforce(u, T0 - timedelta(days=1), "recall")
    assert Usage.from_dict(u.to_dict()) == u
    # a snapshot written before the counted days were kept: its latest day and that day's sources
    old = {"strength": 0.3, "reinforce_count": 2, "reinforced_day": "2026-03-01", "reinforced_sources": ["recall"]}
    assert Usage.from_dict(old).reinforced == ((date(2026, 3, 1), "recall"),)
    assert reinforce(Usage.from_dict(old), T0, "recall").reinforce_count == 2
    assert Usage.from_dict(None, since=T0) == Usage(since=T0)
    with pytest.raises(DomainError, match="strength"):
        Usage.from_dict({"strength": "high"})
    with pytest.raises(DomainError, match="reinforce_count"):
        Usage.from_dict({"reinforce_count": -1})


def test_sweep_instants_are_the_daily_0300_utc_instants_passed():
    last = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)
    assert sweep_instants(last, datetime(2026, 3, 1, 23, 0, tzinfo=UTC)) == []
    assert sweep_instants(last, datetime(2026, 3, 3, 3, 0, tzinfo=UTC)) == [
        datetime(2026, 3, 2, 3, 0, tzinfo=UTC), datetime(2026, 3, 3, 3, 0, tzinfo=UTC)]
    assert sweep_instants(None, datetime(2026, 3, 3, 2, 59, tzinfo=UTC)) == [datetime(2026, 3, 2, 3, 0, tzinfo=UTC)]
    assert len(sweep_instants(last, last + timedelta(days=5000))) == 400
