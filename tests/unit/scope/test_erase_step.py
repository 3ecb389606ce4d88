"""One entry at a time, the scope's side: deleting one entry (gone from the state, journalled without its text,
never brought back by what was said before the delete, brought back by a later restatement) and "remember
this" (a user fact through Stage-2 and synthesis, seeded by importance, no threshold skipped)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from credence.errors import RecordError
from credence.records.control import decode_control, edit_record, erase_record, remember_record
from credence.streams.runtime.journal import entries_from_journal
from credence.streams.scope.erase import refusal
from credence.tables.entries import new_persona_entry
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
SAID = "I have a cat named Miso"


def _raw(record: dict) -> bytes:
    return json.dumps(record).encode()


def _erase(d, entry_id: str, at: datetime, reason: str | None = "wrong"):
    return d.step("erase", decode_control(_raw(erase_record(SCOPE, entry_id, "alice", reason, at))), at)


def _learnt(d, text: str = SAID, at: datetime = T0, turn_id: str | None = None):
    d.turn(text, at, turn_id=turn_id)
    d.flush()
    found = [e for e in d.state.entries.values() if "Miso" in e.text]
    assert found, d.log
    return found[0]


def test_an_erased_entry_leaves_the_state_and_its_event_keeps_no_text(driver_factory):
    d = driver_factory()
    entry = _learnt(d)
    _erase(d, entry.id, T0 + timedelta(hours=1))
    assert entry.id not in d.state.entries
    gone = d.state.erased[entry.id]
    assert gone["version"] == entry.version + 1 and gone["by"] == "alice"
    event = d.journal()[-1]
    assert (event["entry_id"], event["event"], event["cause"]) == (entry.id, "erased", "user_delete:alice: wrong")
    assert "Miso" not in json.dumps(event) and event["entry"]["text"] == ""
    # a fold of the journal (the operator's commands read it) no longer has the entry
    assert entry.id not in {e.id for e in entries_from_journal(d.journal())}


def test_a_replay_of_the_old_turns_never_brings_it_back(driver_factory):
    d = driver_factory()
    entry = _learnt(d, turn_id="t-old")
    _erase(d, entry.id, T0 + timedelta(hours=1))
    d.state.done_facts.clear()  # as a scope rebuilt from the log would be: the old fact not known
    d.turn(SAID, T0, turn_id="t-old")  # the same turn again, said before the delete
    d.flush()
    assert entry.id not in d.state.entries
    assert any("deleted by the user" in line for line in d.log)


def test_a_restatement_after_the_delete_is_new_evidence(driver_factory):
    d = driver_factory()
    entry = _learnt(d)
    _erase(d, entry.id, T0 + timedelta(hours=1))
    again = _learnt(d, at=T0 + timedelta(hours=2))
    assert again.id == entry.id  # the deterministic id comes back, its version line continued
    assert again.version > d.state.erased[entry.id]["version"]


def test_erasing_a_persona_entry_takes_the_reflections_merged_into_it(driver_factory):
    d = driver_factory()
    scope = Scope.parse(SCOPE)
    persona = new_persona_entry("p-1", scope, "The user has a cat named Miso.", T0, subject="cat")
    entry = _learnt(d)
    d.state.entries["p-1"] = persona
    d.state.entries[entry.id] = replace(entry, status="promoted", merged_into_id="p-1")
    assert refusal(d.state, entry.id) == "promoted into p-1"  # the API answers 409: delete p-1
    _erase(d, "p-1", T0 + timedelta(hours=1))
    assert not d.state.entries and set(d.state.erased) == {"p-1", entry.id}


def test_protected_or_unknown_entries_are_not_erased(driver_factory):
    d = driver_factory()
    d.state.entries["card"] = new_persona_entry("card", Scope.parse(SCOPE), "You are a barista.", T0, protected=True)
    before = len(d.journal())
    _erase(d, "card", T0)
    assert "card" in d.state.entries and not d.state.erased and len(d.journal()) == before
    assert refusal(d.state, "card") == "protected" and refusal(d.state, "nope") == "missing"


def test_a_delete_read_before_the_turns_that_make_the_entry_holds_them_back(driver_factory):
    """A replay from the start reads control and turns side by side: the delete may come first."""
    d = driver_factory()
    entry_id = _learnt(driver_factory(), turn_id="t-old").id
    _erase(d, entry_id, T0 + timedelta(hours=1))
    assert entry_id in d.state.erased and not d.journal()  # no snapshot to journal
    d.turn(SAID, T0, turn_id="t-old")
    d.flush()
    assert entry_id not in d.state.entries


def test_remember_goes_through_synthesis_seeded_by_importance(driver_factory):
    d = driver_factory()
    record = decode_control(_raw(remember_record(SCOPE, "rem-1", "The user is allergic to peanuts.", 9,
                                                 "allergy", "alice", T0)))
    d.step("remember", record, T0)
    d.flush()
    made = [e for e in d.state.entries.values() if "peanuts" in e.text]
    assert len(made) == 1 and made[0].importance == 9 and made[0].status == "pending"  # no threshold skipped
    created = [j for j in d.journal() if j["entry_id"] == made[0].id and j["event"] == "created"]
    assert created[0]["cause"] == "user_remember"
    d.step("remember", record, T0)  # the same request again changes nothing
    d.flush()
    assert len([e for e in d.state.entries.values() if "peanuts" in e.text]) == 1


@pytest.mark.parametrize("bad, reason", [
    ({"importance": 11}, "importance"), ({"importance": True}, "importance"), ({"text": " "}, "text"),
    ({"text": "x" * 1001}, "text"), ({"by": ""}, "by"), ({"remember_id": ""}, "remember_id"),
])
def test_a_bad_remember_record_is_refused_with_its_reason(bad, reason):
    record = remember_record(SCOPE, "rem-1", "The user is allergic to peanuts.", 5, None, "alice", T0) | bad
    with pytest.raises(RecordError, match=reason):
        decode_control(_raw(record))


@pytest.mark.parametrize("bad, reason", [({"entry_id": ""}, "entry_id"), ({"reason": "x" * 201}, "reason"),
                                         ({"by": 3}, "by"), ({"entry_id": "x" * 300}, "entry_id")])
def test_a_bad_erase_record_is_refused_with_its_reason(bad, reason):
    with pytest.raises(RecordError, match=reason):
        decode_control(_raw(erase_record(SCOPE, "r-1", "alice", None, T0) | bad))


def test_an_edit_keeps_id_and_counters_and_the_old_wording_in_the_version_history(driver_factory):
    d = driver_factory()
    entry = _learnt(d)
    at = T0 + timedelta(hours=1)
    record = decode_control(_raw(edit_record(SCOPE, entry.id, "The user has a cat named Mochi.", "alice", at)))
    d.step("edit", record, at)
    edited = d.state.entries[entry.id]
    assert edited.text == "The user has a cat named Mochi." and edited.evidence == entry.evidence
    [old] = edited.version_history
    assert (old.text, old.reason, old.replaced_at) == (entry.text, "user_edit", at)
    assert [(j["event"], j["cause"]) for j in d.journal()[-2:]] == [("invalidated", "superseded"),
                                                                    ("edited", "user_edit:alice")]
    d.step("edit", record, at)  # the same edit again changes nothing
    assert d.state.entries[entry.id] == edited
    _erase(d, entry.id, at)  # a delete takes the old wordings too
    assert "Miso" not in json.dumps(d.journal()[-1])


def test_an_unreadable_edit_is_left_out(driver_factory):
    d = driver_factory()
    entry = _learnt(d)
    d.step("edit", decode_control(_raw(edit_record(SCOPE, entry.id, "It was great.", "alice", T0))), T0)
    assert d.state.entries[entry.id] == entry
