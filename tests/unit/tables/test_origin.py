"""Fact origin: a user fact only if every content-bearing cited turn is a user turn."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.tables.origin import fact_origin, is_assent

TURNS = {
    "q": {"role": "ai", "text": "Do you like hiking?"},
    "s": {"role": "ai", "text": "You love hiking, as everyone knows."},
    "yes": {"role": "user", "text": "Yes!"},
    "ok": {"role": "user", "text": "ok, sure"},
    "said": {"role": "user", "text": "I love hiking in the Alps"},
    "lol": {"role": "user", "text": "haha whatever"},
}


@pytest.mark.parametrize("cited, origin", [
    (["said"], "user"),
    (["q", "yes"], "user"),  # an AI question answered "yes" is the user's
    (["q", "ok"], "user"),
    (["q", "said"], "user"),  # a question carries no content: the answer does
    (["s", "yes"], "ai"),  # an AI statement the user acknowledged is the AI's content
    (["s", "said"], "ai"),  # cites AI content: not a user fact
    (["s", "lol"], "ai"),
    (["s"], "ai"),
    (["q"], "ai"),
    ([], "ai"),
    (["unknown"], "ai"),
    (["yes"], "user"),
])
def test_fact_origin(cited, origin):
    assert fact_origin(cited, TURNS) == origin


@pytest.mark.parametrize("text, assent", [
    ("Yes", True), ("yes, I do", True), ("OK.", True), ("Ja, genau", True), ("はい", True), ("是的", True),
    ("Yes, and I also have a dog", False), ("no", False), ("", False), ("I love tea", False),
])
def test_is_assent(text, assent):
    assert is_assent(text) is assent


ROLES = st.sampled_from(list(TURNS))


@given(cited=st.lists(ROLES, max_size=5))
def test_citing_an_ai_statement_never_makes_a_user_fact(cited):
    if "s" in cited:
        assert fact_origin(cited, TURNS) == "ai"
    if not any(TURNS[c]["role"] == "user" for c in cited):
        assert fact_origin(cited, TURNS) == "ai"
    if cited and all(TURNS[c]["role"] == "user" for c in cited):
        assert fact_origin(cited, TURNS) == "user"
