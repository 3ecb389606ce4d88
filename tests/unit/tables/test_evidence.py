import math
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from credence.config.memory import MemorySettings
from credence.errors import CredenceError, DomainError
from credence.tables.evidence import (
    ARCHIVE_CANDIDATE,
    CONFIRMED,
    PENDING,
    PROMOTED,
    Evidence,
    age_days,
    apply_signal,
    derived_tier,
    evidence_score,
    seed_reinforcement,
    seeded_evidence,
    signal_weight,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(hours=3)


# --- signals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "reinforcement", "disputation"),
    [
        ("user_fact_reinforce", 0.5, 0.0),
        ("user_fact_negate", 0.0, 1.0),
        ("user_confirm", 1.0, 0.0),
        ("user_deny", 0.0, 1.0),
        ("negative_keyword", 0.0, 1.0),
        ("user_ignore", -0.2, 0.0),
    ],
)
def test_each_signal_adds_its_seed_weight(kind, reinforcement, disputation):
    ev = apply_signal(Evidence(), kind, T0)
    assert ev.reinforcement == pytest.approx(reinforcement)
    assert ev.disputation == pytest.approx(disputation)


def test_weight_is_added_to_the_stored_counter_not_the_decayed_value():
    ev = Evidence(reinforcement=1.0, rein_last_signal_at=T0 - timedelta(days=30))
    assert apply_signal(ev, "user_confirm", T0).reinforcement == 2.0


@pytest.mark.parametrize("kind", ["user_fact_reinforce", "user_confirm", "user_ignore"])
def test_reinforcing_signal_sets_only_the_reinforcement_clock(kind):
    ev = Evidence(disp_last_signal_at=T0)
    after = apply_signal(ev, kind, LATER)
    assert after.rein_last_signal_at == LATER
    assert after.disp_last_signal_at == T0


@pytest.mark.parametrize("kind", ["user_fact_negate", "user_deny", "negative_keyword"])
def test_disputing_signal_sets_only_the_disputation_clock(kind):
    ev = Evidence(rein_last_signal_at=T0)
    after = apply_signal(ev, kind, LATER)
    assert after.disp_last_signal_at == LATER
    assert after.rein_last_signal_at == T0


def test_reinforcement_may_go_negative():
    ev = apply_signal(apply_signal(Evidence(), "user_ignore", T0), "user_ignore", T0)
    assert ev.reinforcement == pytest.approx(-0.4)


def test_disputation_is_clamped_at_zero():
    settings = MemorySettings(user_deny_weight=-5.0)
    ev = apply_signal(Evidence(disputation=1.0), "user_deny", T0, settings=settings)
    assert ev.disputation == 0.0


def test_unknown_signal_kind_is_a_domain_error():
    with pytest.raises(DomainError, match="unknown signal kind"):
        apply_signal(Evidence(), "user_shrug", T0)
    assert issubclass(DomainError, CredenceError) and issubclass(DomainError, ValueError)


def test_signal_weight_reads_the_settings():
    assert signal_weight("user_ignore") == -0.2
    assert signal_weight("user_confirm", MemorySettings(user_confirm_weight=2.0)) == 2.0


def test_naive_signal_time_means_utc():
    ev = apply_signal(Evidence(), "user_confirm", datetime(2026, 3, 1, 12, 0))
    assert ev.rein_last_signal_at == T0


# --- combo ---------------------------------------------------------------------------------------


def test_combo_second_reinforce_has_no_bonus_third_has():
    ev = Evidence()
    gains = []
    for _ in range(4):
        before = ev.reinforcement
        ev = apply_signal(ev, "user_fact_reinforce", T0)
        gains.append(ev.reinforcement - before)
    assert gains == pytest.approx([0.5, 0.5, 1.0, 1.0])
    assert ev.user_fact_reinforce_count == 4


def test_combo_counter_counts_only_user_fact_reinforces():
    ev = apply_signal(Evidence(), "user_confirm", T0)
    ev = apply_signal(ev, "user_fact_negate", T0)
    assert ev.user_fact_reinforce_count == 0


def test_combo_counter_never_decays():
    ev = Evidence(user_fact_reinforce_count=2, reinforcement=1.0, rein_last_signal_at=T0 - timedelta(days=3650))
    after = apply_signal(ev, "user_fact_reinforce", T0)
    assert after.user_fact_reinforce_count == 3
    assert after.reinforcement == pytest.approx(2.0)


# --- score and decay -----------------------------------------------------------------------------


def test_score_is_reinforcement_minus_disputation_when_fresh():
    ev = Evidence(reinforcement=3.0, disputation=1.0, rein_last_signal_at=T0, disp_last_signal_at=T0)
    assert evidence_score(ev, T0) == 2.0


def test_reinforcement_halves_in_30_days():
    ev = Evidence(reinforcement=1.0, rein_last_signal_at=T0)
    assert evidence_score(ev, T0 + timedelta(days=30)) == 0.5
    assert evidence_score(ev, T0 + timedelta(days=60)) == 0.25


def test_disputation_halves_in_180_days():
    ev = Evidence(disputation=1.0, disp_last_signal_at=T0)
    assert evidence_score(ev, T0 + timedelta(days=180)) == -0.5


def test_age_is_in_fractional_days():
    ev = Evidence(reinforcement=1.0, rein_last_signal_at=T0)
    assert evidence_score(ev, T0 + timedelta(hours=12)) == pytest.approx(0.5 ** (0.5 / 30))


@pytest.mark.parametrize("clock", [None, T0 + timedelta(days=2)])
def test_missing_or_future_clock_means_age_zero(clock):
    ev = Evidence(reinforcement=1.0, disputation=0.5, rein_last_signal_at=clock, disp_last_signal_at=clock)
    assert evidence_score(ev, T0) == 0.5
    assert age_days(clock, T0) == 0.0


def test_unparseable_timestamp_means_age_zero():
    ev = Evidence.from_dict({"reinforcement": 1.0, "rein_last_signal_at": "last tuesday"})
    assert ev.rein_last_signal_at is None
    assert evidence_score(ev, T0 + timedelta(days=300)) == 1.0


def test_protected_scores_infinity():
    assert evidence_score(Evidence(disputation=100.0), T0, protected=True) == math.inf
    assert derived_tier(math.inf) == PROMOTED


def test_half_lives_come_from_settings():
    ev = Evidence(reinforcement=1.0, rein_last_signal_at=T0)
    settings = MemorySettings(reinforcement_half_life_days=10)
    assert evidence_score(ev, T0 + timedelta(days=10), settings=settings) == 0.5


# --- tiers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("score", "tier"),
    [
        (2.0, PROMOTED),
        (1.9999999, CONFIRMED),
        (1.0, CONFIRMED),
        (0.9999999, PENDING),
        (0.0, PENDING),
        (-1.9999999, PENDING),
        (-2.0, ARCHIVE_CANDIDATE),
        (-50.0, ARCHIVE_CANDIDATE),
        (-math.inf, ARCHIVE_CANDIDATE),
    ],
)
def test_derived_tier_boundaries(score, tier):
    assert derived_tier(score) == tier


# --- seed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("importances", "seed"),
    [([10], 0.8), ([9], 0.6), ([8], 0.4), ([7], 0.2), ([6], 0.0), ([1], 0.0), ([], 0.0),
     ([3, 9, 7], 0.6), ([11], 0.8), ([99, 2], 0.8)],
)  # fmt: skip
def test_seed_by_maximum_source_importance(importances, seed):
    assert seed_reinforcement(importances) == seed


def test_seeded_entry_clock_is_creation_time_unseeded_has_none():
    assert seeded_evidence([9], T0) == Evidence(reinforcement=0.6, rein_last_signal_at=T0)
    assert seeded_evidence([5], T0) == Evidence()


def test_seed_does_not_reach_a_threshold_by_itself():
    assert derived_tier(evidence_score(seeded_evidence([10], T0), T0)) == PENDING


# --- wire form -----------------------------------------------------------------------------------


def test_to_dict_from_dict_round_trip():
    ev = Evidence(1.5, 0.5, T0, LATER, 3, date(2026, 3, 1), 4)
    d = ev.to_dict()
    assert d == {
        "reinforcement": 1.5,
        "disputation": 0.5,
        "rein_last_signal_at": "2026-03-01T12:00:00+00:00",
        "disp_last_signal_at": "2026-03-01T15:00:00+00:00",
        "sub_zero_days": 3,
        "sub_zero_last_increment_date": "2026-03-01",
        "user_fact_reinforce_count": 4,
    }
    assert Evidence.from_dict(d) == ev


def test_from_dict_reads_naive_as_utc_and_converts_offsets():
    ev = Evidence.from_dict(
        {"rein_last_signal_at": "2026-03-01T12:00:00", "disp_last_signal_at": "2026-03-01T21:00:00+09:00"}
    )
    assert ev.rein_last_signal_at == T0 and ev.rein_last_signal_at.tzinfo == UTC
    assert ev.disp_last_signal_at == T0 and ev.disp_last_signal_at.utcoffset() == timedelta(0)


def test_from_dict_accepts_z_suffix_and_defaults_missing_fields():
    ev = Evidence.from_dict({"rein_last_signal_at": "2026-03-01T12:00:00Z"})
    assert ev == Evidence(rein_last_signal_at=T0)
    assert Evidence.from_dict({}) == Evidence() == Evidence.from_dict(None)


def test_from_dict_keeps_unparseable_as_no_timestamp():
    ev = Evidence.from_dict(
        {"rein_last_signal_at": 17, "disp_last_signal_at": "", "sub_zero_last_increment_date": "yesterday"}
    )
    assert ev.rein_last_signal_at is None and ev.disp_last_signal_at is None
    assert ev.sub_zero_last_increment_date is None


@pytest.mark.parametrize("bad", ["lots", True, float("nan"), [1]])
def test_from_dict_rejects_a_non_numeric_counter(bad):
    with pytest.raises(DomainError, match="reinforcement"):
        Evidence.from_dict({"reinforcement": bad})


def test_aware_non_utc_datetimes_are_normalised():
    tokyo = timezone(timedelta(hours=9))
    ev = Evidence(rein_last_signal_at=datetime(2026, 3, 1, 21, 0, tzinfo=tokyo))
    assert ev.to_dict()["rein_last_signal_at"] == "2026-03-01T12:00:00+00:00"
