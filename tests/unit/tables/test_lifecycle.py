from datetime import UTC, date, datetime, timedelta

import pytest

from credence.config.memory import MemorySettings
from credence.errors import DomainError
from credence.tables.evidence import Evidence, effective_disputation, effective_reinforcement
from credence.tables.lifecycle import (
    ATTEMPT,
    BLOCK,
    NOT_DUE,
    WAIT,
    MergeOutcome,
    apply_merge_decision,
    archive,
    block_promotion,
    confirm_by_score,
    default_persona_id,
    deny,
    merge_evidence,
    merge_into_persona,
    promote_decision,
    promotion_is_current,
    record_promote_attempt,
    sweep_entry,
)
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def fresh(r: float = 0.0, d: float = 0.0, at: datetime = T0) -> Evidence:
    return Evidence(reinforcement=r, disputation=d, rein_last_signal_at=at, disp_last_signal_at=at)


# --- pending → confirmed -------------------------------------------------------------------------


def test_pending_confirms_at_exactly_one(reflection_factory):
    confirmed = confirm_by_score(reflection_factory(evidence=fresh(1.0)), T0)
    assert confirmed.status == "confirmed" and confirmed.confirmed_at == T0 and confirmed.version == 2


def test_pending_below_one_stays(reflection_factory):
    assert confirm_by_score(reflection_factory(evidence=fresh(0.9999999)), T0) is None


def test_confirm_uses_the_decayed_score(reflection_factory):
    entry = reflection_factory(evidence=fresh(1.9))
    assert confirm_by_score(entry, T0 + timedelta(days=30)) is None  # 0.95 by then


@pytest.mark.parametrize("status", ["confirmed", "promoted", "denied", "promote_blocked", "archived"])
def test_only_pending_is_confirmed(reflection_factory, status):
    assert confirm_by_score(reflection_factory(status=status, evidence=fresh(5.0)), T0) is None


def test_a_stored_status_is_never_demoted_by_score(reflection_factory):
    confirmed = reflection_factory(status="confirmed", evidence=fresh(d=10.0))
    assert confirm_by_score(confirmed, T0) is None
    assert promote_decision(confirmed, T0) == NOT_DUE
    assert sweep_entry(confirmed, T0)[0].status == "confirmed"


def test_confirm_rejects_persona_entries(persona_factory):
    with pytest.raises(DomainError, match="reflections"):
        confirm_by_score(persona_factory(), T0)


# --- promote decision and throttle ---------------------------------------------------------------


def test_confirmed_at_exactly_two_is_due(reflection_factory):
    assert promote_decision(reflection_factory(status="confirmed", evidence=fresh(2.0)), T0) == ATTEMPT


def test_confirmed_below_two_is_not_due(reflection_factory):
    assert promote_decision(reflection_factory(status="confirmed", evidence=fresh(1.9999999)), T0) == NOT_DUE


def test_pending_at_two_is_not_promoted_directly(reflection_factory):
    assert promote_decision(reflection_factory(evidence=fresh(3.0)), T0) == NOT_DUE


@pytest.mark.parametrize(
    ("since_last", "decision"),
    [(timedelta(minutes=29, seconds=59), WAIT), (timedelta(minutes=30), ATTEMPT), (timedelta(hours=5), ATTEMPT)],
)
def test_throttle_29_59_waits_30_00_attempts(reflection_factory, since_last, decision):
    entry = reflection_factory(
        status="confirmed", evidence=fresh(2.5), promote_attempts=1, last_promote_attempt_at=T0 - since_last
    )
    assert promote_decision(entry, T0) == decision


def test_blocked_after_five_attempts(reflection_factory):
    four = reflection_factory(
        status="confirmed", evidence=fresh(2.5), promote_attempts=4, last_promote_attempt_at=T0 - timedelta(hours=1)
    )
    assert promote_decision(four, T0) == ATTEMPT
    five, _ = record_promote_attempt(four, T0)
    assert five.promote_attempts == 5
    assert promote_decision(five, T0 + timedelta(minutes=29, seconds=59)) == WAIT  # the 5th call may still land
    assert promote_decision(five, T0 + timedelta(minutes=30)) == BLOCK
    blocked = block_promotion(five, T0 + timedelta(minutes=30))
    assert blocked.status == "promote_blocked" and blocked.version == five.version + 1
    assert promote_decision(blocked, T0 + timedelta(days=1)) == NOT_DUE


def test_max_attempts_and_interval_come_from_settings(reflection_factory):
    settings = MemorySettings(max_promote_attempts=1, promote_retry_interval_minutes=1)
    entry = reflection_factory(
        status="confirmed", evidence=fresh(2.5), promote_attempts=1, last_promote_attempt_at=T0 - timedelta(minutes=1)
    )
    assert promote_decision(entry, T0, settings=settings) == BLOCK


def test_attempt_is_recorded_before_the_llm_call(reflection_factory):
    entry = reflection_factory(status="confirmed", evidence=fresh(2.5))
    attempted, ticket = record_promote_attempt(entry, T0)
    assert attempted.promote_attempts == 1 and attempted.last_promote_attempt_at == T0
    assert attempted.version == entry.version + 1 and attempted.status == "confirmed"
    assert (ticket.entry_id, ticket.version, ticket.attempt) == (entry.id, attempted.version, 1)
    assert promote_decision(attempted, T0 + timedelta(minutes=1)) == WAIT


def test_record_attempt_needs_a_confirmed_reflection(reflection_factory):
    with pytest.raises(DomainError, match="only confirmed"):
        record_promote_attempt(reflection_factory(status="denied"), T0)


# --- late results --------------------------------------------------------------------------------


def test_result_is_current_after_an_evidence_signal(reflection_factory):
    from credence.tables.entries import record_signal

    attempted, ticket = record_promote_attempt(reflection_factory(status="confirmed", evidence=fresh(2.5)), T0)
    assert promotion_is_current(attempted, ticket)
    assert promotion_is_current(record_signal(attempted, "user_confirm", T0), ticket)


def test_late_result_after_denial_archive_or_newer_attempt_is_refused(reflection_factory):
    attempted, ticket = record_promote_attempt(reflection_factory(status="confirmed", evidence=fresh(2.5)), T0)
    later = T0 + timedelta(hours=1)
    assert not promotion_is_current(deny(attempted, later), ticket)
    assert not promotion_is_current(archive(attempted, later), ticket)
    newer, _ = record_promote_attempt(attempted, later)
    assert not promotion_is_current(newer, ticket)


def test_applying_a_result_to_a_denied_reflection_is_an_error(reflection_factory):
    denied = reflection_factory(status="denied")
    with pytest.raises(DomainError, match="promotion_is_current"):
        apply_merge_decision(denied, MergeOutcome("create"), T0)


# --- merge-on-promote outcomes -------------------------------------------------------------------


def test_create_outcome(reflection_factory):
    reflection = reflection_factory(
        status="confirmed", importance=8, source_fact_ids=("f1",),
        evidence=Evidence(2.5, 0.5, T0 - timedelta(days=1), T0 - timedelta(days=2), 3, date(2026, 2, 1), 4),
    )  # fmt: skip
    step = apply_merge_decision(reflection, MergeOutcome("create", text="Prefers tea."), T0)
    persona = step.persona
    assert step.action == "create"
    assert persona.id == default_persona_id(reflection) and persona.kind == "persona" and persona.status == "active"
    assert persona.text == "Prefers tea." and persona.importance == 8 and persona.source_fact_ids == ("f1",)
    assert persona.merged_from_ids == (reflection.id,) and persona.scope == reflection.scope
    # the reflection's evidence carried over at its age (decayed to T0, clocks at T0) and its tally kept
    ev = reflection.evidence
    assert persona.evidence == Evidence(effective_reinforcement(ev, T0), effective_disputation(ev, T0), T0, T0,
                                        3, date(2026, 2, 1), 4)
    assert step.reflection.status == "promoted" and step.reflection.promoted_at == T0
    assert step.reflection.merged_into_id == persona.id


def test_create_keeps_reflection_text_without_a_rewrite_and_takes_an_explicit_id(reflection_factory):
    reflection = reflection_factory(status="confirmed", text="likes tea")
    step = apply_merge_decision(reflection, MergeOutcome("create"), T0, persona_id="p-new")
    assert step.persona.id == "p-new" and step.persona.text == "likes tea"


def test_merge_outcome_takes_per_side_maximum_at_the_merge_instant_not_sum(reflection_factory, persona_factory):
    persona = persona_factory(
        evidence=Evidence(3.0, 0.2, T0 - timedelta(days=10), T0 - timedelta(days=10), 5, date(2026, 2, 20), 1),
        source_fact_ids=("f0",),
    )
    reflection = reflection_factory(
        status="confirmed", source_fact_ids=("f1",), importance=9,
        evidence=Evidence(2.0, 1.0, T0 - timedelta(days=1), T0 - timedelta(days=1), 0, None, 6),
    )  # fmt: skip
    later = T0 + timedelta(hours=2)
    step = apply_merge_decision(
        reflection, MergeOutcome("merge", target_id=persona.id, text="merged text"), later, target=persona
    )
    merged = step.persona
    assert merged.id == persona.id and merged.version == persona.version + 1
    # reinforcement: the persona's 3.0 ten days old outweighs the reflection's 2.0 one day old; disputation:
    # the reflection's; both at their age at the merge. The persona's sub-zero tally is kept.
    rein, disp = effective_reinforcement(persona.evidence, later), effective_disputation(reflection.evidence, later)
    assert rein > effective_reinforcement(reflection.evidence, later)
    assert merged.evidence == Evidence(rein, disp, later, later, 5, date(2026, 2, 20), 6)
    assert merged.text == "merged text" and merged.importance == 9
    assert merged.merged_from_ids == (reflection.id,) and merged.source_fact_ids == ("f0", "f1")
    assert step.reflection.status == "promoted" and step.reflection.merged_into_id == persona.id


def test_repeated_merge_is_a_no_op(reflection_factory, persona_factory):
    persona = persona_factory()
    reflection = reflection_factory(status="confirmed", evidence=fresh(2.0))
    once = merge_into_persona(persona, reflection, T0)
    assert once.merged_from_ids == (reflection.id,)
    assert merge_into_persona(once, reflection, T0 + timedelta(days=1)) is once


def test_merge_needs_the_matching_target(reflection_factory, persona_factory):
    reflection = reflection_factory(status="confirmed")
    with pytest.raises(DomainError, match="not supplied"):
        apply_merge_decision(reflection, MergeOutcome("merge", target_id="p9"), T0, target=persona_factory(id="p1"))
    with pytest.raises(DomainError, match="target_id"):
        MergeOutcome("merge")
    with pytest.raises(DomainError, match="action"):
        MergeOutcome("maybe")


@pytest.mark.parametrize(
    "fields", [{"protected": True}, {"status": "archived"}, {"scope": Scope("acme", "u2", "aria")}]
)
def test_merge_target_must_be_active_unprotected_and_in_scope(reflection_factory, persona_factory, fields):
    target = persona_factory(**{k: v for k, v in fields.items() if k in ("protected", "scope")})
    if "status" in fields:
        target = archive(target, T0)
    with pytest.raises(DomainError, match="cannot merge"):
        merge_into_persona(target, reflection_factory(status="confirmed"), T0)


def test_reject_is_final_until_a_newer_positive_signal(reflection_factory):
    from credence.tables.entries import record_signal

    attempted, _ = record_promote_attempt(reflection_factory(status="confirmed", evidence=fresh(2.5)), T0)
    step = apply_merge_decision(attempted, MergeOutcome("reject"), T0 + timedelta(minutes=1))
    assert step.action == "reject" and step.persona is None
    rejected = step.reflection
    assert rejected.status == "confirmed" and rejected.promotion_rejected_at == T0 + timedelta(minutes=1)
    assert rejected.promote_attempts == 0 and rejected.version == attempted.version + 1
    for later in (timedelta(minutes=30), timedelta(days=3)):
        assert promote_decision(rejected, T0 + later) == NOT_DUE  # not retried: an answer, not a failure
    reopened = record_signal(rejected, "user_confirm", T0 + timedelta(hours=2))
    assert promote_decision(reopened, T0 + timedelta(hours=2)) == ATTEMPT
    # a disputing signal never reopens it
    disputed = record_signal(rejected, "user_deny", T0 + timedelta(hours=2))
    assert promote_decision(disputed, T0 + timedelta(hours=2)) == NOT_DUE


def test_merge_evidence_is_symmetric_in_counters():
    a = Evidence(1.0, 3.0, T0, T0, 4, date(2026, 1, 1), 2)
    b = Evidence(2.0, 0.5, None, None, 0, None, 7)
    # b's reinforcement has no clock (never decays), so it is carried on without one
    expected = Evidence(2.0, 3.0, None, T0, 4, date(2026, 1, 1), 7)
    assert merge_evidence(a, b, T0) == merge_evidence(b, a, T0) == expected


# --- denial and archival -------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["pending", "confirmed", "promote_blocked"])
def test_denial_moves_to_denied(reflection_factory, status):
    denied = deny(reflection_factory(status=status), T0)
    assert denied.status == "denied" and denied.updated_at == T0


@pytest.mark.parametrize("status", ["denied", "promoted", "archived"])
def test_denial_of_a_terminal_reflection_changes_nothing(reflection_factory, status):
    entry = reflection_factory(status=status)
    assert deny(entry, T0) is entry


def test_archive_sets_status_and_time_but_never_for_protected(persona_factory):
    archived = archive(persona_factory(), T0)
    assert archived.status == "archived" and archived.archived_at == T0
    assert archive(archived, T0 + timedelta(days=1)) is archived
    with pytest.raises(DomainError, match="protected"):
        archive(persona_factory(protected=True), T0)


def test_sweep_entry_counts_and_archives_on_the_14th_day(reflection_factory):
    entry = reflection_factory(evidence=Evidence(disputation=1.0, disp_last_signal_at=T0, sub_zero_days=13,
                                                 sub_zero_last_increment_date=date(2026, 2, 28)))  # fmt: skip
    swept, archived = sweep_entry(entry, T0)
    assert archived and swept.status == "archived" and swept.evidence.sub_zero_days == 14 and swept.archived_at == T0


def test_sweep_entry_same_day_is_unchanged(reflection_factory):
    entry = reflection_factory(evidence=Evidence(disputation=1.0, disp_last_signal_at=T0))
    once, _ = sweep_entry(entry, T0)
    assert once.evidence.sub_zero_days == 1 and once.version == entry.version + 1
    assert sweep_entry(once, T0 + timedelta(hours=1)) == (once, False)


def test_sweep_entry_uses_the_tenant_time_zone(reflection_factory):
    settings = MemorySettings(tenant_time_zones={"acme": "Asia/Tokyo"})
    entry = reflection_factory(evidence=Evidence(disputation=1.0, disp_last_signal_at=T0))
    swept, _ = sweep_entry(entry, datetime(2026, 3, 1, 15, 30, tzinfo=UTC), settings=settings)
    assert swept.evidence.sub_zero_last_increment_date == date(2026, 3, 2)


@pytest.mark.parametrize("status", ["promoted", "archived"])
def test_sweep_skips_terminal_reflections(reflection_factory, status):
    entry = reflection_factory(status=status, evidence=fresh(d=5.0))
    assert sweep_entry(entry, T0) == (entry, False)


def test_sweep_counts_denied_reflections(reflection_factory):
    entry = reflection_factory(status="denied", evidence=fresh(d=1.0))
    assert sweep_entry(entry, T0)[0].evidence.sub_zero_days == 1


def test_sweep_skips_protected(persona_factory):
    entry = persona_factory(protected=True, evidence=fresh(d=5.0, r=0.0))
    assert sweep_entry(entry, T0) == (entry, False)
