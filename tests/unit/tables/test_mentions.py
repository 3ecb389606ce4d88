from datetime import UTC, datetime, timedelta

import pytest

from credence.tables.evidence import Evidence
from credence.tables.mentions import counts_mentions, is_suppressed, lift_suppression, record_mention

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
FIVE_H = timedelta(hours=5)
SECOND = timedelta(seconds=1)


def mention_all(entry, *times):
    for at in times:
        entry = record_mention(entry, at)
    return entry


def test_each_mention_appends_its_time(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H)
    assert entry.recent_mentions == (T0, T0 + H) and entry.suppressed_at is None
    assert entry.version == 3


def test_third_mention_inside_the_window_suppresses(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H, T0 + 2 * H)
    assert entry.suppressed_at == T0 + 2 * H
    assert is_suppressed(entry, T0 + 2 * H)


def test_confirmed_reflections_are_counted_too(reflection_factory):
    entry = mention_all(reflection_factory(status="confirmed"), T0, T0 + H, T0 + 2 * H)
    assert entry.suppressed_at == T0 + 2 * H


def test_mention_exactly_five_hours_old_drops(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H, T0 + FIVE_H)
    assert entry.recent_mentions == (T0 + H, T0 + FIVE_H) and entry.suppressed_at is None


def test_mention_just_under_five_hours_old_still_counts(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H, T0 + FIVE_H - SECOND)
    assert entry.suppressed_at == T0 + FIVE_H - SECOND


def test_suppression_lifts_five_hours_after_it_began_and_clears_mentions(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H, T0 + 2 * H)
    began = entry.suppressed_at
    assert is_suppressed(entry, began + FIVE_H - SECOND)
    assert lift_suppression(entry, began + FIVE_H - SECOND) is entry
    assert not is_suppressed(entry, began + FIVE_H)
    lifted = lift_suppression(entry, began + FIVE_H)
    assert lifted.suppressed_at is None and lifted.recent_mentions == ()


def test_a_mention_after_the_suppression_ended_starts_a_fresh_count(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H, T0 + 2 * H)
    after = record_mention(entry, T0 + 2 * H + FIVE_H)
    assert after.suppressed_at is None and after.recent_mentions == (T0 + 2 * H + FIVE_H,)


def test_mentions_while_suppressed_do_not_extend_it(persona_factory):
    entry = mention_all(persona_factory(), T0, T0 + H, T0 + 2 * H, T0 + 3 * H)
    assert entry.suppressed_at == T0 + 2 * H


def test_mentions_change_no_evidence(persona_factory):
    evidence = Evidence(reinforcement=1.0, rein_last_signal_at=T0)
    entry = mention_all(persona_factory(evidence=evidence), T0, T0 + H, T0 + 2 * H)
    assert entry.evidence == evidence


@pytest.mark.parametrize("status", ["pending", "promoted", "denied", "archived"])
def test_reflections_other_than_confirmed_are_never_counted(reflection_factory, status):
    entry = reflection_factory(status=status)
    assert not counts_mentions(entry)
    assert mention_all(entry, T0, T0 + H, T0 + 2 * H) is entry


def test_a_promote_blocked_reflection_is_counted_like_the_confirmed_one_it_is(reflection_factory):
    entry = reflection_factory(status="promote_blocked")
    assert counts_mentions(entry)
    assert mention_all(entry, T0, T0 + H, T0 + 2 * H).suppressed_at == T0 + 2 * H


def test_protected_entries_are_never_counted(persona_factory):
    entry = persona_factory(protected=True)
    assert mention_all(entry, T0, T0 + H, T0 + 2 * H) is entry
