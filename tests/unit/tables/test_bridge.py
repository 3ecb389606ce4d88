"""The gated bridge to verified facts: retired by default, ripe rule, one candidate with provenance."""

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.config.usage import BridgeSettings, TopicFilter
from credence.errors import BridgeError, BridgeRetired, CredenceError
from credence.tables.bridge import NotRipe, approve_candidate, is_ripe, nominate, unripe_reasons
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.scope import Scope
from credence.tables.usage import Usage

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("eco", "u1", "aria")
OPEN = BridgeSettings(bridge_enabled=True, ripe_min_age_days=30, ripe_min_reinforce_count=5,
                      topic_filters={"eco": TopicFilter(subjects=("ecology",), keywords=("river", "oak tree"))})
LATER = T0 + timedelta(days=30)


def ripe_entry(**fields):
    entry = new_persona_entry("p1", SCOPE, "walks along the river every morning", T0, subject="habits")
    return replace(entry, usage=Usage(strength=0.6, reinforce_count=5, last_reinforced_at=T0 + timedelta(days=29)),
                   version=4, **fields)


def test_bridge_retired_is_an_error_of_the_project_root():
    assert issubclass(BridgeRetired, BridgeError) and issubclass(BridgeError, CredenceError)


def test_retired_by_default_nothing_is_emitted_and_existing_candidates_are_preserved():
    existing = [nominate(ripe_entry(), LATER, nominated_by="ana", settings=OPEN)]
    before = copy.deepcopy(existing)
    with pytest.raises(BridgeRetired, match="BRIDGE_ENABLED=true"):
        nominate(ripe_entry(), LATER, nominated_by="ana")
    with pytest.raises(BridgeRetired):
        approve_candidate(existing[0], LATER, approved_by="bo")
    assert existing == before


def test_retired_is_checked_before_anything_else():
    with pytest.raises(BridgeRetired):
        nominate(replace(ripe_entry(), status="archived"), T0, nominated_by="")


def test_ripe_at_exactly_n_days_and_k_reinforcements():
    assert is_ripe(ripe_entry(), LATER, settings=OPEN)
    assert not is_ripe(ripe_entry(), LATER - timedelta(seconds=1), settings=OPEN)
    fewer = replace(ripe_entry(), usage=replace(ripe_entry().usage, reinforce_count=4))
    assert unripe_reasons(fewer, LATER, settings=OPEN) == ["reinforced 4 times, needs 5"]


def test_topic_filter_per_tenant_default_accepts_nothing():
    assert "topic filter" in " ".join(unripe_reasons(ripe_entry(), LATER, settings=BridgeSettings(bridge_enabled=True,
                                                                                               ripe_min_reinforce_count=0)))
    by_subject = replace(ripe_entry(), text="likes tea", subject="Ecology")
    assert is_ripe(by_subject, LATER, settings=OPEN)
    by_phrase = replace(ripe_entry(), text="planted an Oak-tree last spring")
    assert is_ripe(by_phrase, LATER, settings=OPEN)
    not_a_word = replace(ripe_entry(), text="drives a riverboat")
    assert not is_ripe(not_a_word, LATER, settings=OPEN)
    other_tenant = replace(ripe_entry(), tenant="acme")
    assert not is_ripe(other_tenant, LATER, settings=OPEN)
    everyone = OPEN.model_copy(update={"topic_filters": {"*": TopicFilter(keywords=("river",))}})
    assert is_ripe(other_tenant, LATER, settings=everyone)


@pytest.mark.parametrize("status", ["denied", "archived", "promoted", "promote_blocked"])
def test_only_alive_entries_are_ripe(status):
    entry = new_reflection("r1", SCOPE, "swims in the river", T0)
    entry = replace(entry, status=status, usage=ripe_entry().usage)
    assert not is_ripe(entry, LATER, settings=OPEN)


def test_protected_and_invalidated_entries_are_not_ripe():
    assert not is_ripe(replace(ripe_entry(), protected=True), LATER, settings=OPEN)
    assert not is_ripe(replace(ripe_entry(), invalidated_at=LATER), LATER, settings=OPEN)


def test_nomination_is_one_candidate_with_full_provenance():
    entry = ripe_entry()
    v2 = replace(entry, version=2, text="walks by the river")
    signals = [{"event": "signal", "cause": "user_confirm", "at": "2026-01-02T00:00:00+00:00"}]
    c = nominate(entry, LATER, nominated_by=" ana ", versions=[v2, entry, v2], signals=signals, settings=OPEN)
    assert c["candidate_id"] == "p1@4" and c["status"] == "nominated" and c["nominated_by"] == "ana"
    assert (c["tenant"], c["user"], c["character"], c["entry_id"]) == ("eco", "u1", "aria", "p1")
    assert c["provenance"]["entry"] == entry.to_dict()
    assert [v["version"] for v in c["provenance"]["versions"]] == [2, 4]
    assert c["provenance"]["signals"] == signals
    assert c["provenance"]["usage"]["reinforce_count"] == 5


def test_not_ripe_says_why_and_a_nomination_needs_a_human():
    with pytest.raises(NotRipe, match="alive 10.0 days, needs 30"):
        nominate(ripe_entry(), T0 + timedelta(days=10), nominated_by="ana", settings=OPEN)
    with pytest.raises(BridgeError, match="human"):
        nominate(ripe_entry(), LATER, nominated_by=" ", settings=OPEN)


def test_approve_candidate():
    c = nominate(ripe_entry(), LATER, nominated_by="ana", settings=OPEN)
    approved = approve_candidate(c, LATER, approved_by="bo", settings=OPEN)
    assert approved["status"] == "approved" and approved["approved_by"] == "bo"
    assert c["status"] == "nominated"
    with pytest.raises(BridgeError, match="nominated"):
        approve_candidate(approved, LATER, approved_by="bo", settings=OPEN)


@given(st.floats(0, 400, allow_nan=False), st.integers(0, 20), st.booleans())
def test_ripe_exactly_when_every_condition_holds(age_days, count, on_topic):
    entry = replace(ripe_entry(), text="walks along the river" if on_topic else "likes tea",
                    usage=Usage(reinforce_count=count))
    now = T0 + timedelta(days=age_days)
    assert is_ripe(entry, now, settings=OPEN) == (age_days >= 30 and count >= 5 and on_topic)


@given(st.floats(0, 400, allow_nan=False), st.integers(0, 20))
def test_a_retired_bridge_refuses_every_entry(age_days, count):
    entry = replace(ripe_entry(), usage=Usage(reinforce_count=count))
    with pytest.raises(BridgeRetired):
        nominate(entry, T0 + timedelta(days=age_days), nominated_by="ana",
                 settings=OPEN.model_copy(update={"bridge_enabled": False}))


def test_bridge_settings_from_the_environment(monkeypatch):
    from credence.config.settings import load_settings

    monkeypatch.setenv("CREDENCE_BRIDGE__BRIDGE_ENABLED", "true")
    monkeypatch.setenv("CREDENCE_BRIDGE__TOPIC_FILTERS", '{"eco": {"subjects": ["Ecology"], "keywords": ["river"]}}')
    s = load_settings().bridge
    assert s.bridge_enabled and s.topic_filter("eco").subjects == ("ecology",)
    assert s.topic_filter("acme") == TopicFilter()
