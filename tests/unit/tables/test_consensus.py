"""External consensus: a verification pipeline's or an operator's 0..1 corroboration of an entry."""

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.errors import DomainError
from credence.tables.consensus import Consensus
from credence.tables.entries import Entry, new_persona_entry, set_consensus
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")


def test_consensus_is_set_with_who_and_when_and_a_repeat_is_a_no_op():
    entry = new_persona_entry("p1", SCOPE, "likes tea", T0)
    assert entry.consensus is None
    set_once = set_consensus(entry, Consensus(0.8, "verifier", T0 + timedelta(hours=1)), T0 + timedelta(hours=1))
    assert set_once.consensus == Consensus(0.8, "verifier", T0 + timedelta(hours=1))
    assert set_once.version == entry.version + 1 and set_once.evidence == entry.evidence
    assert set_consensus(set_once, Consensus(0.8, "verifier", T0 + timedelta(hours=1)), T0) is set_once


def test_a_character_card_entry_takes_no_consensus():
    card = new_persona_entry("c1", SCOPE, "is a barista", T0, protected=True)
    with pytest.raises(DomainError, match="protected"):
        set_consensus(card, Consensus(0.9, "ops", T0), T0)


@pytest.mark.parametrize("score", [-0.01, 1.01, math.nan, math.inf, True, "0.5", None])
def test_a_score_outside_zero_to_one_is_refused(score):
    with pytest.raises(DomainError, match="score"):
        Consensus(score, "ops", T0)


def test_who_must_be_named():
    with pytest.raises(DomainError, match="by"):
        Consensus(0.5, " ", T0)


@given(st.floats(0, 1), st.text(min_size=1).filter(str.strip))
def test_round_trip_and_snapshots_written_before_consensus(score, by):
    entry = set_consensus(new_persona_entry("p1", SCOPE, "likes tea", T0), Consensus(score, by, T0), T0)
    assert Entry.from_dict(entry.to_dict()) == entry
    old = entry.to_dict()
    del old["consensus"]
    assert Entry.from_dict(old).consensus is None
