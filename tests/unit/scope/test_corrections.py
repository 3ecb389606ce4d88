"""Corrections that stick (issue 32 item 5), one scope driven through step() with the rules backend:
after a correction the memory block either no longer holds the old statement or shows it under the
disputed heading, and the new value the user gave is in it; a negative about something else keeps its facts."""

from __future__ import annotations

from datetime import timedelta

import pytest

from credence.tables.rendering import DISPUTED_HEADING, render_memory_block
from credence.tables.scope import Scope

from .conftest import T0

DAYS = timedelta(days=3)


def converse(d, sessions: list[list[str]], first: int = 0):
    """Session i three days after session i-1 (numbering from `first`); every user turn answered by a
    neutral AI turn. Returns an instant three days after the last."""
    at = T0
    for i, session in enumerate(sessions, start=first):
        at = T0 + i * DAYS
        for text in session:
            role, text = ("ai", text[3:]) if text.startswith("AI:") else ("user", text)
            d.turn(text, at, role=role)
            at += timedelta(minutes=1)
            if role == "user":
                d.turn("I see.", at, role="ai")
                at += timedelta(minutes=1)
        d.flush()
    return at + DAYS


def current_and_disputed(d, at) -> tuple[str, str]:
    text = render_memory_block(Scope.parse(d.state.scope), d.state.entries.values(), at, settings=d.memory).text
    current, _, disputed = text.partition(DISPUTED_HEADING)
    return current, disputed


@pytest.mark.parametrize(("sessions", "old", "new"), [
    ([["I live in Berlin.", "I love living in Berlin."], ["I live in Berlin and I love it."],
      ["Big news: I moved to Lisbon last month."], ["I don't live in Berlin anymore, I live in Lisbon now."]],
     "Berlin", "Lisbon"),
    ([["I love coffee."], ["I really love coffee."], ["I quit coffee last week."], ["I don't drink coffee anymore."]],
     "loves coffee", None),
    ([["I have a cat named Mitten."], ["I have a cat named Mitten, she is sweet."],
      ["Sorry, I said it wrong before: my cat's name is Miso, not Mitten."]], "Mitten", "Miso"),
    ([["I work as a nurse at the city hospital."], ["I work as a nurse at the city hospital."],
      ["AI:How is nursing going?", "No, that's wrong. I don't work as a nurse anymore, I quit."]], "nurse", None),
])
def test_a_corrected_value_is_never_presented_as_current(driver_factory, sessions, old, new):
    d = driver_factory()
    assert old in current_and_disputed(d, converse(d, sessions[:2]))[0]  # established over two sessions
    current, disputed = current_and_disputed(d, converse(d, sessions[2:], first=2))
    assert old not in current
    if new is not None:
        assert new in current and new not in disputed


@pytest.mark.parametrize(("sessions", "kept"), [
    ([["I love hiking."], ["I love hiking."], ["AI:Do you like tea?", "No, I don't like coffee. I love green tea."]],
     ["loves hiking", "loves green tea"]),
    ([["I love coffee."], ["I love coffee."], ["AI:Are you tired?", "No, I'm not tired."]], ["loves coffee"]),
])
def test_a_negative_about_something_else_keeps_the_facts(driver_factory, sessions, kept):
    d = driver_factory()
    current, disputed = current_and_disputed(d, converse(d, sessions))
    for fact in kept:
        assert fact in current and fact not in disputed
