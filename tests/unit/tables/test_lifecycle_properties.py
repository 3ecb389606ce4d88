"""Properties of merging, rendering budgets and mentions (hypothesis)."""

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

from hypothesis import HealthCheck, assume, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence, effective_disputation, effective_reinforcement
from credence.tables.lifecycle import (
    NOT_DUE,
    blocked_retry_due,
    confirm_by_score,
    merge_evidence,
    promote_decision,
    sweep_cannot_change,
    sweep_entry,
    time_cannot_move,
)
from credence.tables.mentions import lift_suppression, record_mention
from credence.tables.rendering import by_priority, render_memory_block
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")
counters = st.floats(min_value=-100, max_value=100, allow_nan=False)
non_negative = st.floats(min_value=0, max_value=100, allow_nan=False)


@st.composite
def evidence(draw) -> Evidence:
    return Evidence(
        reinforcement=draw(counters),
        disputation=draw(non_negative),
        rein_last_signal_at=T0 - timedelta(days=draw(st.integers(0, 400))),
        disp_last_signal_at=T0 - timedelta(days=draw(st.integers(0, 400))),
        sub_zero_days=draw(st.integers(0, 20)),
        user_fact_reinforce_count=draw(st.integers(0, 9)),
    )


clocks = st.one_of(st.none(), st.integers(-400 * 24, 30 * 24).map(lambda h: T0 + timedelta(hours=h)))


@st.composite
def evidence_with_any_clocks(draw) -> Evidence:
    """Evidence whose clocks may be missing, long past, or after the merge instant (event-time disorder)."""
    return Evidence(
        reinforcement=draw(counters),
        disputation=draw(non_negative),
        rein_last_signal_at=draw(clocks),
        disp_last_signal_at=draw(clocks),
        sub_zero_days=draw(st.integers(0, 20)),
        sub_zero_last_increment_date=draw(st.one_of(st.none(), st.dates(date(2025, 1, 1), date(2026, 3, 1)))),
        user_fact_reinforce_count=draw(st.integers(0, 9)),
    )


def _at_most(value: float, bound: float) -> bool:
    return value <= bound + 1e-9 * max(1.0, abs(bound))


@given(evidence_with_any_clocks(), evidence_with_any_clocks(), st.integers(-30 * 24, 30 * 24),
       st.lists(st.floats(0, 5000 * 24, allow_nan=False), min_size=1, max_size=8))
def test_merged_evidence_keeps_its_age_and_its_tallies(a, b, merge_hours, later_hours):
    now = T0 + timedelta(hours=merge_hours)
    merged = merge_evidence(a, b, now)
    for hours in [0.0, *later_hours]:
        at = now + timedelta(hours=hours)
        for read in (effective_reinforcement, effective_disputation):
            # never above the larger side at any later instant: nothing decayed becomes fresh again
            assert _at_most(read(merged, at), max(read(a, at), read(b, at)))
        # and never below both sides either: a merge does not manufacture negative evidence
        assert _at_most(min(effective_reinforcement(a, at), effective_reinforcement(b, at)),
                        effective_reinforcement(merged, at))
    assert merged.sub_zero_days == max(a.sub_zero_days, b.sub_zero_days)
    assert merged.user_fact_reinforce_count == max(a.user_fact_reinforce_count, b.user_fact_reinforce_count)
    days = [d for d in (a.sub_zero_last_increment_date, b.sub_zero_last_increment_date) if d is not None]
    assert merged.sub_zero_last_increment_date == (max(days) if days else None)
    assert merge_evidence(a, b, now) == merge_evidence(b, a, now)
    assert merge_evidence(merged, merged, now) == merged


def test_a_year_old_disputation_stays_a_year_old_after_a_merge():
    old = Evidence(disputation=1.0, disp_last_signal_at=T0 - timedelta(days=360), sub_zero_days=9)
    merged = merge_evidence(old, Evidence(reinforcement=0.5, rein_last_signal_at=T0), T0)
    assert round(effective_disputation(merged, T0), 4) == round(effective_disputation(old, T0), 4) == 0.25
    assert merged.sub_zero_days == 9


@st.composite
def scope_entries(draw):
    entries = []
    for i in range(draw(st.integers(0, 12))):
        text = " ".join(["w"] * draw(st.integers(0, 12)))
        importance = draw(st.integers(1, 10))
        if draw(st.booleans()):
            entry = new_persona_entry(f"p{i}", SCOPE, text, T0, importance=importance, protected=draw(st.booleans()))
        else:
            entry = new_reflection(f"r{i}", SCOPE, text, T0, importance=importance)
            entry = replace(entry, status=draw(st.sampled_from(["pending", "confirmed"])))
        entries.append(replace(entry, evidence=draw(evidence())))
    return entries


def words(text: str) -> int:
    return len(text.split())


@given(scope_entries(), st.integers(0, 40), st.integers(0, 40))
def test_budgets_hold_and_the_scan_is_greedy_in_priority_order(entries, persona_budget, reflection_budget):
    settings = MemorySettings(persona_token_budget=persona_budget, reflection_token_budget=reflection_budget)
    block = render_memory_block(SCOPE, entries, T0, settings=settings, count_tokens=words)
    # Disputed entries keep their place in their kind's budget; only their heading differs.
    persona = block.persona + tuple(e for e in block.disputed if e.kind == "persona")
    reflections = block.reflections + tuple(e for e in block.disputed if e.kind == "reflection")
    assert block.persona_tokens == sum(words(e.text) for e in persona) <= persona_budget
    assert block.reflection_tokens == sum(words(e.text) for e in reflections) <= reflection_budget
    assert set(block.protected) == {e for e in entries if e.protected}
    for chosen in (block.persona, block.reflections, persona[len(block.persona):], reflections[len(block.reflections):]):
        assert list(chosen) == by_priority(chosen, T0, settings=settings)
    # Every eligible persona entry left out would not have fit when its turn came.
    eligible = by_priority([e for e in entries if e.kind == "persona" and not e.protected], T0, settings=settings)
    used = 0
    for entry in eligible:
        if entry in persona:
            used += words(entry.text)
        else:
            assert used + words(entry.text) > persona_budget


@given(st.lists(st.integers(0, 20 * 3600), max_size=12))
def test_pending_reflections_are_never_counted(seconds):
    entry = new_reflection("r1", SCOPE, "might like jazz", T0)
    for s in sorted(seconds):
        assert record_mention(entry, T0 + timedelta(seconds=s)) is entry


@given(st.lists(st.integers(0, 20 * 3600), max_size=12))
def test_mentions_never_change_evidence_and_stay_inside_the_window(seconds):
    entry = new_persona_entry("p1", SCOPE, "likes tea", T0, evidence=Evidence(reinforcement=1.0))
    for s in sorted(seconds):
        at = T0 + timedelta(seconds=s)
        entry = record_mention(entry, at)
        assert entry.evidence == Evidence(reinforcement=1.0)
        assert all(at - m < timedelta(hours=5) for m in entry.recent_mentions)
        assert len(entry.recent_mentions) <= len(seconds)


@st.composite
def reflection_at_rest(draw):
    """A reflection with any status and evidence whose clocks may be missing or after T0, and a settings
    object whose half-lives may run either way round."""
    clock = st.one_of(st.none(), st.integers(-400, 30).map(lambda d: T0 + timedelta(days=d)))
    ev = Evidence(reinforcement=draw(counters), disputation=draw(non_negative),
                  rein_last_signal_at=draw(clock), disp_last_signal_at=draw(clock))
    entry = replace(new_reflection("r1", SCOPE, "likes tea", T0 - timedelta(days=500)), evidence=ev,
                    status=draw(st.sampled_from(["pending", "confirmed", "promote_blocked", "promoted", "denied"])),
                    promote_attempts=draw(st.integers(0, 6)),
                    last_promote_attempt_at=draw(st.one_of(st.none(), st.just(T0 - timedelta(hours=1)))),
                    promotion_rejected_at=draw(st.one_of(st.none(), st.just(T0 - timedelta(days=2)))))
    settings = MemorySettings(reinforcement_half_life_days=draw(st.sampled_from([30.0, 180.0, 400.0])),
                              disputation_half_life_days=draw(st.sampled_from([30.0, 180.0])))
    return entry, settings


# The conditional properties below check only the examples their predicate holds for (assume() discards the
# rest; a predicate that turned always-false would make them vacuous): at least MIN_HELD of the examples
# asked for must reach the checks. As many as the earlier return-early form checked (46 and 13 of 100).
MIN_HELD = 0.8
# Discarding most drawn examples is the design here (the minimum is checked instead); a loaded host makes it slow.
DISCARDS = [HealthCheck.filter_too_much, HealthCheck.too_slow]



def test_a_reflection_time_cannot_move_stays_unmoved_at_every_later_instant():
    held = []

    @examples(max_examples=50, suppress_health_check=DISCARDS)
    @given(reflection_at_rest(), st.lists(st.floats(0, 5000, allow_nan=False), min_size=1, max_size=8))
    def check(case, later_hours):
        entry, settings = case
        assume(time_cannot_move(entry, T0, settings=settings))
        held.append(entry)
        for hours in later_hours:
            at = T0 + timedelta(hours=hours)
            assert confirm_by_score(entry, at, settings=settings) is None
            assert not blocked_retry_due(entry, at, settings=settings)
            assert promote_decision(entry, at, settings=settings) == NOT_DUE

    check()
    assert len(held) >= MIN_HELD * 50, len(held)


def test_time_can_move_a_score_when_disputation_decays_faster():
    # Reinforcement 4 fading over 180 days, disputation 3.5 over 30: the score climbs from 0.5 to 2.3 in 60 days.
    settings = MemorySettings(reinforcement_half_life_days=180.0, disputation_half_life_days=30.0)
    ev = Evidence(reinforcement=4.0, disputation=3.5, rein_last_signal_at=T0, disp_last_signal_at=T0)
    entry = replace(new_reflection("r1", SCOPE, "likes tea", T0), evidence=ev, status="confirmed")
    assert promote_decision(entry, T0 + timedelta(days=60), settings=settings) != NOT_DUE
    assert not time_cannot_move(entry, T0, settings=settings)
    assert time_cannot_move(entry, T0, settings=MemorySettings())  # the seed's half-lives: 30 d < 180 d


def test_a_counter_without_a_clock_does_not_decay_so_time_can_move_the_score():
    # Reinforcement 3 with no clock stays 3 while disputation 2 fades: the score climbs from 1 past 2.
    ev = Evidence(reinforcement=3.0, disputation=2.0, rein_last_signal_at=None, disp_last_signal_at=T0)
    entry = replace(new_reflection("r1", SCOPE, "likes tea", T0), evidence=ev, status="confirmed")
    assert promote_decision(entry, T0 + timedelta(days=400)) != NOT_DUE
    assert not time_cannot_move(entry, T0)
    assert not time_cannot_move(replace(entry, evidence=replace(ev, rein_last_signal_at=T0 + timedelta(days=1))), T0)


def test_an_entry_no_sweep_can_change_is_unchanged_by_every_later_sweep():
    held = []

    @examples(max_examples=20, suppress_health_check=DISCARDS)
    @given(reflection_at_rest(), st.booleans(), st.integers(0, 9),
           st.lists(st.floats(0, 5000, allow_nan=False), min_size=1, max_size=8))
    def check(case, suppressed, sub_zero, later_hours):
        entry, settings = case
        entry = replace(entry, suppressed_at=T0 - timedelta(hours=1) if suppressed else None,
                        evidence=replace(entry.evidence, sub_zero_days=sub_zero))
        assume(sweep_cannot_change(entry, settings=settings))
        held.append(entry)
        for hours in sorted(later_hours):
            at = T0 + timedelta(hours=hours)
            assert lift_suppression(entry, at, settings=settings) is entry
            assert sweep_entry(entry, at, settings=settings) == (entry, False)

    check()
    assert len(held) >= MIN_HELD * 20, len(held)


def test_disputation_makes_an_entry_sweepable_again():
    ev = Evidence(reinforcement=1.0, disputation=0.5, rein_last_signal_at=T0, disp_last_signal_at=T0)
    entry = replace(new_reflection("r1", SCOPE, "likes tea", T0), evidence=ev)
    assert not sweep_cannot_change(entry)  # its score goes below zero within weeks
    assert sweep_entry(entry, T0 + timedelta(days=60))[0] is not entry
    assert sweep_cannot_change(replace(entry, evidence=replace(ev, disputation=0.0)))
