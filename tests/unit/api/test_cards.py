"""Character cards: validation, the cards topic record, and rendering outside the budgets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from credence.config.memory import MemorySettings
from credence.errors import RecordError
from credence.records.topics import TOPICS
from credence.streams.api.cards import Card, check_card_entries, decode_card
from credence.streams.api.directory import Directory
from credence.streams.api.reads import prompt
from credence.tables.scope import Scope
from credence.tables.tokens import default_token_counter

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("entries, reason", [
    ("x", "list"), ([{"id": "a"}], "exactly"), ([{"id": "a", "text": "t", "extra": 1}], "exactly"),
    ([{"id": "a/b", "text": "t"}], "card entry id"), ([{"id": "a", "text": " "}], "text"),
    ([{"id": "a", "text": "t"}, {"id": "a", "text": "u"}], "twice"),
])
def test_bad_card_entries_are_refused_with_the_reason(entries, reason):
    with pytest.raises(RecordError, match=reason):
        check_card_entries(entries)


def test_card_record_round_trips_and_tombstone_clears_it():
    card = Card("acme", "barista", (("tone", "Warm."), ("origin", "From Lisbon.")), NOW)
    assert decode_card(card.encode()) == card
    d = Directory()
    d.apply(TOPICS.cards, b"acme/barista", card.encode())
    assert d.card("acme", "barista") == card and d.card("acme", "tutor") is None
    d.apply(TOPICS.cards, b"acme/barista", None)
    assert d.card("acme", "barista") is None


def test_card_renders_for_the_scope_outside_the_budgets_and_is_never_scored():
    scope = Scope("acme", "alice", "barista")
    card = Card("acme", "barista", (("tone", "Warm."), ("origin", "From Lisbon.")), NOW).scope_entries(scope)
    memory = MemorySettings(persona_token_budget=0, reflection_token_budget=0)
    block = prompt(scope, [], card, NOW, memory, default_token_counter())
    assert block.text == "Character card:\n- Warm.\n- From Lisbon."
    assert [(e.id, e.tier, e.score, e.protected) for e in block.entries] == [
        ("tone", "protected", None, True), ("origin", "protected", None, True)]
    assert (block.tokens.persona, block.tokens.reflections) == (0, 0)
