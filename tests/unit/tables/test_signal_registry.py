"""One registry of signal kinds (tables.evidence.SIGNALS): names, counters and weights are read from it."""

from __future__ import annotations

from credence.config.memory import MemorySettings
from credence.tables.evidence import (
    DISPUTING_SIGNALS,
    FEEDBACK_SIGNALS,
    REINFORCING_SIGNALS,
    RELATION_SIGNALS,
    SIGNALS,
    signal_weight,
)


def test_every_weight_setting_belongs_to_exactly_one_registered_signal():
    weights = {name for name in MemorySettings.model_fields if name.endswith("_weight")}
    assert weights == {s.weight_setting for s in SIGNALS.values()}


def test_the_seed_table_of_weights_is_what_the_registry_reads():
    assert {k: signal_weight(k) for k in SIGNALS} == {
        "user_fact_reinforce": 0.5, "user_fact_negate": 1.0, "user_confirm": 1.0, "user_deny": 1.0,
        "negative_keyword": 1.0, "user_ignore": -0.2,
    }
    assert signal_weight("user_deny", MemorySettings(user_deny_weight=3.0)) == 3.0


def test_derived_views_partition_the_registry():
    assert REINFORCING_SIGNALS | DISPUTING_SIGNALS == set(SIGNALS)
    assert not REINFORCING_SIGNALS & DISPUTING_SIGNALS
    assert FEEDBACK_SIGNALS == {"confirm": "user_confirm", "deny": "user_deny", "ignore": "user_ignore"}
    assert RELATION_SIGNALS == {"reinforce": "user_fact_reinforce", "negate": "user_fact_negate"}
