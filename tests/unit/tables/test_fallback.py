from datetime import UTC, datetime, timedelta

from credence.config.memory import MemorySettings
from credence.tables.evidence import Evidence
from credence.tables.fallback import confirmed_clock_start, fallback_tick
from credence.tables.lifecycle import default_persona_id
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)
SECOND = timedelta(seconds=1)
NEGATIVE = Evidence(disputation=9.0, disp_last_signal_at=T0)


def test_pending_confirms_seven_days_after_creation_score_ignored(reflection_factory):
    entry = reflection_factory(evidence=NEGATIVE)
    assert fallback_tick(entry, T0 + WEEK - SECOND) is None
    step = fallback_tick(entry, T0 + WEEK)
    assert step.action == "confirm" and step.persona is None
    assert step.reflection.status == "confirmed" and step.reflection.confirmed_at == T0 + WEEK


def test_one_transition_per_tick(reflection_factory):
    entry = reflection_factory()
    step = fallback_tick(entry, T0 + timedelta(days=30))
    assert step.reflection.status == "confirmed"  # not promoted, although 30 days passed


def test_confirmed_promotes_seven_days_after_confirmation_score_ignored(reflection_factory):
    confirmed_at = T0 + WEEK
    entry = reflection_factory(status="confirmed", confirmed_at=confirmed_at, evidence=NEGATIVE)
    assert fallback_tick(entry, confirmed_at + WEEK - SECOND) is None
    step = fallback_tick(entry, confirmed_at + WEEK)
    assert step.action == "create"
    assert step.reflection.status == "promoted" and step.persona.id == default_persona_id(entry)
    assert step.persona.text == entry.text and step.persona.merged_from_ids == (entry.id,)


def test_simple_merge_folds_into_a_persona_entry_with_the_same_text(reflection_factory, persona_factory):
    twin = persona_factory(text="  Prefers TEA to coffee ")
    other = persona_factory(text="is learning Rust")
    card = persona_factory(text="prefers tea to coffee", protected=True)
    entry = reflection_factory(status="confirmed", confirmed_at=T0, text="prefers tea to coffee")
    step = fallback_tick(entry, T0 + WEEK, personas=[card, other, twin])
    assert step.action == "merge" and step.persona.id == twin.id
    assert step.persona.text == twin.text and step.persona.merged_from_ids == (entry.id,)


def test_simple_merge_ignores_other_scopes(reflection_factory, persona_factory):
    elsewhere = persona_factory(text="prefers tea to coffee", scope=Scope("acme", "u2", "aria"))
    entry = reflection_factory(status="confirmed", confirmed_at=T0, text="prefers tea to coffee")
    assert fallback_tick(entry, T0 + WEEK, personas=[elsewhere]).action == "create"


def test_switching_off_restarts_the_confirmed_clock(reflection_factory):
    entry = reflection_factory(status="confirmed", confirmed_at=T0)
    switched_off = T0 + timedelta(days=5)
    assert confirmed_clock_start(entry, switched_off) == switched_off
    assert fallback_tick(entry, T0 + WEEK, switched_off_at=switched_off) is None
    assert fallback_tick(entry, switched_off + WEEK - SECOND, switched_off_at=switched_off) is None
    assert fallback_tick(entry, switched_off + WEEK, switched_off_at=switched_off).action == "create"


def test_a_switch_before_confirmation_does_not_move_the_clock(reflection_factory):
    entry = reflection_factory(status="confirmed", confirmed_at=T0)
    assert confirmed_clock_start(entry, T0 - timedelta(days=1)) == T0


def test_other_statuses_do_not_move(reflection_factory, persona_factory):
    for status in ("promoted", "denied", "promote_blocked", "archived"):
        assert fallback_tick(reflection_factory(status=status), T0 + timedelta(days=99)) is None
    assert fallback_tick(persona_factory(), T0 + timedelta(days=99)) is None


def test_periods_come_from_settings(reflection_factory):
    settings = MemorySettings(fallback_confirm_after_days=1)
    assert fallback_tick(reflection_factory(), T0 + timedelta(days=1), settings=settings).action == "confirm"
