"""When two statements say the same thing (streams/scope/restate.py on the rules backend's stems)."""

from __future__ import annotations

import pytest

from credence.config.memory import MemorySettings
from credence.streams.scope.restate import richer, same_statement

SAME = [
    ("The user is learning French with a tutor.", "The user is learning French."),
    ("The user prefers hiking on weekends.", "The user prefers hiking."),
    ("The user likes running.", "The user likes running in the rain."),
    ("The user loves jazz.", "The user enjoys jazz."),
    ("The user has a dog.", "The user has a dog named Rex."),
]
DIFFERENT = [
    ("The user lives in Montreal.", "The user likes Montreal."),
    ("The user likes cycling.", "The user does not like cycling."),
    ("The user likes coffee.", "The user works at a coffee shop."),
    ("The user likes green tea.", "The user likes black tea."),
    ("The user likes cats.", "The user likes dogs."),
    ("The user loves it.", "The user enjoys what they do."),
    ("The user loves their dogs.", "The user has two dogs."),
    ("The user loves spending time with their family.", "The user loves spending time outdoors."),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_restatements(a, b):
    assert same_statement(a, b, MemorySettings()) and same_statement(b, a, MemorySettings())


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_statements(a, b):
    assert not same_statement(a, b, MemorySettings())


def test_the_richer_text_is_the_one_that_says_everything_and_more():
    assert richer("The user is learning French.", "The user is learning French with a tutor.") == \
        "The user is learning French with a tutor."
    assert richer("The user loves jazz.", "The user enjoys jazz.") == "The user loves jazz."
