"""Corrections that stick, one scope driven through step() with the rules backend:
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
     "loves living in Berlin", "Lisbon"),
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


# -- rebuttals and forget requests in conversation --------------------------------------------------------

def held(d, *entries):
    for entry in entries:
        d.state.entries[entry.id] = entry
    return entries


def scope_entries(d):
    from credence.tables.entries import new_persona_entry, new_reflection
    from credence.tables.evidence import Evidence

    scope = Scope.parse(d.state.scope)
    return held(
        d,
        new_persona_entry("p-nurse", scope, "The user works as a nurse at the city hospital.", T0,
                          subject="occupation", evidence=Evidence(reinforcement=2.5, rein_last_signal_at=T0)),
        new_reflection("r-hiking", scope, "The user likes hiking.", T0, subject="hiking"),
        new_reflection("r-rex", scope, "The user has a dog named Rex.", T0, subject="dog"),
    )


def test_a_rebuttal_beside_a_surfaced_reflection_disputes_the_entry_the_user_spoke_about(driver_factory):
    d = driver_factory()
    nurse, hiking, rex = scope_entries(d)
    at = T0 + timedelta(days=1)
    d.turn("Still hiking on weekends? And how is the nursing at the hospital?", at, role="ai",
           surfaced_ids=[hiking.id, nurse.id])
    d.turn("No, that's wrong. I don't work as a nurse anymore, I quit.", at + timedelta(minutes=1),
           turn_id="t-rebut")
    # The surfaced reflection the user did not speak about is not denied (it was, before: the only check).
    assert d.state.entries[hiking.id].status == "pending"
    assert d.state.entries[hiking.id].evidence.disputation == 0
    # The persona entry the user took back is disputed by the target check, and shown as disputed at once.
    assert d.state.entries[nurse.id].evidence.disputation > 0
    current, disputed = current_and_disputed(d, at + timedelta(minutes=2))
    assert "nurse" not in current and "nurse" in disputed
    assert [r.task for r in d.requests_of("target")] == ["target"]


def test_a_no_to_an_unrelated_question_disputes_nothing(driver_factory):
    d = driver_factory()
    nurse, hiking, rex = scope_entries(d)
    at = T0 + timedelta(days=1)
    d.turn("Are you tired after your hiking and the hospital shift?", at, role="ai", surfaced_ids=[hiking.id, nurse.id])
    d.turn("No, I'm not tired.", at + timedelta(minutes=1))
    assert all(e.evidence.disputation == 0 for e in d.state.entries.values())
    assert d.state.entries[hiking.id].status == "pending"


@pytest.mark.parametrize("request_text", ["Please forget what I told you about my dog Rex.",
                                          "Forget about Rex, my dog. I don't want to talk about it."])
def test_a_forget_request_takes_the_entries_it_names_out_of_the_block_at_once(driver_factory, request_text):
    d = driver_factory()
    nurse, hiking, rex = scope_entries(d)
    at = T0 + timedelta(days=1)
    d.turn("Good evening!", at, role="ai")
    d.turn(request_text, at + timedelta(minutes=1), turn_id="t-forget")
    assert d.state.entries[rex.id].status == "denied"
    events = [e for e in d.journal() if e["entry_id"] == rex.id]
    assert [(e["event"], e["cause"], e["to_status"]) for e in events] == [("signal", "forget_request:t-forget", "denied")]
    current, disputed = current_and_disputed(d, at + timedelta(minutes=2))
    assert "Rex" not in current + disputed
    assert "hiking" in current and "nurse" in current  # nothing the user did not name


def test_a_forget_request_archives_a_persona_entry_and_keeps_what_it_does_not_name(driver_factory):
    d = driver_factory()
    nurse, hiking, rex = scope_entries(d)
    at = T0 + timedelta(days=1)
    d.turn("Please don't remember that I work as a nurse.", at, turn_id="t-forget-job")
    assert nurse.id not in d.state.entries
    (archived,) = d.archives()
    assert (archived["entry_id"], archived["reason"]) == (nurse.id, "forget_request:t-forget-job")
    assert {e.id for e in d.state.entries.values()} == {hiking.id, rex.id}


def test_dont_forget_is_not_a_forget_request(driver_factory):
    d = driver_factory()
    nurse, hiking, rex = scope_entries(d)
    d.turn("Don't forget my dog Rex has his vet visit on Friday!", T0 + timedelta(days=1))
    assert d.state.entries[rex.id].status == "pending" and d.state.entries[rex.id].evidence.disputation == 0


def test_a_forget_word_in_a_rebuttal_disputes_nothing_the_character_did_not_mention(driver_factory):
    d = driver_factory()
    nurse, hiking, rex = scope_entries(d)
    d.turn("No, I never forget my dog Rex and his walks.", T0 + timedelta(days=1))
    assert all(e.evidence.disputation == 0 and e.status in ("pending", "active") for e in d.state.entries.values())
