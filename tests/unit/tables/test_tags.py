"""Tenant tags: a turn's are validated and bounded; an entry keeps their union, bounded."""

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.errors import DomainError, RecordError
from credence.records.turn import decode_turn
from credence.tables import tags
from credence.tables.entries import Entry

TURN = {"v": 1, "tenant": "acme", "user": "u1", "character": "aria", "turn_id": "t1", "role": "user",
        "text": "I love tea.", "ts": "2026-03-01T12:00:00Z"}


def turn_with(metadata) -> bytes:
    return json.dumps(TURN | {"metadata": metadata}).encode()


def test_a_turns_tags_are_read_from_metadata_kept_once_and_written_back():
    turn = decode_turn(turn_with({"tags": ["travel", "vip", "travel"], "source": "app"}))
    assert turn.tags == ("travel", "vip")
    assert turn.to_dict()["metadata"] == {"tags": ["travel", "vip"]}  # the tenant's other keys are not ours
    assert decode_turn(turn.encode()).tags == turn.tags
    assert "metadata" not in decode_turn(json.dumps(TURN).encode()).to_dict()
    assert decode_turn(turn_with({})).tags == () and decode_turn(turn_with(None)).tags == ()


@pytest.mark.parametrize("metadata, reason", [
    ("travel", "'metadata' must be an object"),
    ([], "'metadata' must be an object"),
    ({"tags": "travel"}, "tags must be a list"),
    ({"tags": [""]}, "non-empty string"),
    ({"tags": [3]}, "non-empty string"),
    ({"tags": [None]}, "non-empty string"),
    ({"tags": ["x" * 65]}, "at most 64 characters"),
    ({"tags": [" padded"]}, "printable"),
    ({"tags": ["new\nline"]}, "printable"),
    ({"tags": ["bell\x07"]}, "printable"),
    ({"tags": ["\ud800"]}, "printable"),
    ({"tags": [f"t{i}" for i in range(17)]}, "at most 16 tags"),
])
def test_a_bad_tag_refuses_the_turn_with_the_reason(metadata, reason):
    with pytest.raises(RecordError, match=reason):
        decode_turn(turn_with(metadata))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.text(min_size=1, max_size=3), max_size=10), max_size=12))
def test_an_entrys_tags_are_the_union_each_once_first_kept_and_bounded(groups):
    got = tags.union(*groups)
    seen = list(dict.fromkeys(t for g in groups for t in g))
    assert list(got) == seen[:tags.MAX_ENTRY_TAGS]
    assert tags.union(got, *groups) == got  # adding what it has changes nothing


def test_entry_tags_round_trip_and_old_snapshots_have_none():
    entry = Entry(id="r1", kind="reflection", tenant="acme", user="u1", character="aria", text="likes tea",
                  created_at=datetime(2026, 3, 1, 12, tzinfo=UTC), status="pending", tags=["a", "b"])
    assert entry.tags == ("a", "b") and Entry.from_dict(entry.to_dict()) == entry
    old = entry.to_dict()
    del old["tags"]
    assert Entry.from_dict(old).tags == ()


def test_check_tag_names_what_is_wrong():
    with pytest.raises(DomainError, match="at most 64"):
        tags.check_tag("y" * 100)
