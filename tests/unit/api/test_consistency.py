"""The consistency token and the `?wait=` query: what a read waits for, and every bad value a 400."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.errors import ApiError
from credence.streams.api import consistency


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.integers(0, 999_999), st.integers(0, 2**62), max_size=40))
def test_a_token_names_each_partitions_offset_back(positions):
    token = consistency.encode(positions)
    assert consistency.decode(token) == positions if positions else token == ""


def test_a_token_keeps_the_highest_offset_a_partition_got():
    positions: dict[int, int] = {}
    for partition, offset in ((3, 10), (3, 7), (1, 4), (3, 12)):
        consistency.merged(positions, partition, offset)
    assert consistency.encode(positions) == "1:4,3:12"
    assert consistency.decode("3:5,3:2") == {3: 5}


@pytest.mark.parametrize("token", ["", "3", "3:", ":4", "a:1", "1:-2", "1:2,", "1:2;3:4", "1:2 ", "9" * 7 + ":1",
                                   "1:" * 3000])
def test_a_malformed_token_is_refused_with_a_reason(token):
    with pytest.raises(ApiError) as refused:
        consistency.decode(token)
    assert refused.value.status == 400 and "token" in refused.value.reason


def test_no_wait_asks_nothing_and_its_companions_alone_are_refused():
    assert consistency.wait_of({}, 30.0, token_needed=True) is None
    for query in ({"timeout": "3"}, {"token": "1:2"}):
        with pytest.raises(ApiError, match="goes with wait"):
            consistency.wait_of(query, 30.0, token_needed=True)
    with pytest.raises(ApiError, match="goes with wait"):
        consistency.wait_of({"timeout": "3"}, 30.0, token_needed=False)
    assert consistency.wait_of({"token": "1:2"}, 30.0, token_needed=False) is None  # a turn's status reads it


@pytest.mark.parametrize("query, reason", [
    ({"wait": "done"}, "wait must be one of"),
    ({"wait": "accepted"}, "wait must be one of"),  # accepted is what POST already answers
    ({"wait": "applied", "timeout": "soon"}, "timeout must be a number"),
    ({"wait": "applied", "timeout": "0"}, "at most 30"),
    ({"wait": "applied", "timeout": "-1"}, "at most 30"),
    ({"wait": "applied", "timeout": "31"}, "at most 30"),
    ({"wait": "applied", "timeout": "nan"}, "at most 30"),
    ({"wait": "applied", "timeout": "inf"}, "at most 30"),
])
def test_a_wait_out_of_bounds_is_a_400_naming_the_value(query, reason):
    with pytest.raises(ApiError, match=reason) as refused:
        consistency.wait_of(query | {"token": "1:2"}, 30.0, token_needed=True)
    assert refused.value.status == 400


def test_a_read_needs_the_token_a_post_does_not():
    with pytest.raises(ApiError, match="needs the token"):
        consistency.wait_of({"wait": "applied"}, 30.0, token_needed=True)
    posted = consistency.wait_of({"wait": "extracted"}, 30.0, token_needed=False)
    assert (posted.wait, posted.timeout, posted.token) == ("extracted", 30.0, {})
    read = consistency.wait_of({"wait": "applied", "timeout": "2.5", "token": "4:9"}, 30.0, token_needed=True)
    assert (read.wait, read.timeout, read.token) == ("applied", 2.5, {4: 9})
