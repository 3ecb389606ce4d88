"""The seed's numbers are the defaults of MemorySettings, under the seed's names, and overridable."""

import pytest
from pydantic import ValidationError

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.config.settings import load_settings
from credence.errors import ConfigError


def test_defaults_are_the_seed_numbers():
    s = MemorySettings()
    assert (s.reinforcement_half_life_days, s.disputation_half_life_days) == (30, 180)
    assert (s.user_fact_reinforce_weight, s.user_fact_negate_weight, s.user_confirm_weight) == (0.5, 1.0, 1.0)
    assert (s.user_deny_weight, s.negative_keyword_weight, s.user_ignore_weight) == (1.0, 1.0, -0.2)
    assert (s.combo_threshold, s.combo_bonus) == (2, 0.5)
    assert s.seed_reinforcement_by_importance == {10: 0.8, 9: 0.6, 8: 0.4, 7: 0.2}
    assert (s.promoted_threshold, s.confirmed_threshold, s.archive_candidate_threshold) == (2.0, 1.0, -2.0)
    assert (s.archive_after_sub_zero_days, s.archive_sweep_interval_hours) == (14, 1)
    assert (s.persona_token_budget, s.reflection_token_budget) == (2000, 2000)
    assert (s.promote_retry_interval_minutes, s.max_promote_attempts) == (30, 5)
    assert (s.fallback_confirm_after_days, s.fallback_promote_after_days) == (7, 7)
    assert (s.mention_window_hours, s.suppress_after_mentions, s.suppression_hours) == (5, 3, 5)
    assert (s.stage2_max_facts_per_batch, s.stage2_rerank_above_candidates) == (20, 30)
    assert (s.stage2_observation_max_tokens, s.stage2_max_prompt_tokens) == (200, 15000)
    assert "en" in s.negative_keywords and s.time_zone == "UTC" and s.tenant_time_zones == {}
    assert s == DEFAULT_MEMORY_SETTINGS


def test_frozen_and_closed():
    with pytest.raises(ValidationError):
        MemorySettings(half_life=3)
    with pytest.raises(ValidationError):
        DEFAULT_MEMORY_SETTINGS.combo_bonus = 1.0


def test_zone_for_tenant_falls_back_to_the_default_zone():
    s = MemorySettings(time_zone="Europe/Berlin", tenant_time_zones={"acme": "Asia/Tokyo"})
    assert str(s.zone_for("acme")) == "Asia/Tokyo"
    assert str(s.zone_for("other")) == str(s.zone_for()) == "Europe/Berlin"


def test_environment_overrides_nested_memory_settings(monkeypatch):
    monkeypatch.setenv("CREDENCE_MEMORY__REINFORCEMENT_HALF_LIFE_DAYS", "10")
    monkeypatch.setenv("CREDENCE_MEMORY__TENANT_TIME_ZONES", '{"acme": "Asia/Tokyo"}')
    monkeypatch.setenv("CREDENCE_MEMORY__SEED_REINFORCEMENT_BY_IMPORTANCE", '{"10": 1.0}')
    memory = load_settings().memory
    assert memory.reinforcement_half_life_days == 10
    assert memory.tenant_time_zones == {"acme": "Asia/Tokyo"}
    assert memory.seed_reinforcement_by_importance == {10: 1.0}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TIME_ZONE", "Nowhere/Land"),
        ("REINFORCEMENT_HALF_LIFE_DAYS", "0"),
        ("SEED_REINFORCEMENT_BY_IMPORTANCE", '{"11": 1}'),
    ],
)
def test_invalid_overrides_are_config_errors(monkeypatch, name, value):
    monkeypatch.setenv(f"CREDENCE_MEMORY__{name}", value)
    with pytest.raises(ConfigError):
        load_settings()
