"""The rules backend's Stage 1 writes only self-contained statements about the user: a pronoun is
resolved to what the turn named when that is unambiguous, the speaker's "my" becomes "their", a cut
phrase loses its dangling tail, and anything still unreadable alone is dropped."""

from __future__ import annotations

import pytest

from credence.streams.llm.rules import refusals
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.rules.extraction import extract_facts
from credence.tables.statement import is_self_contained


def texts(turn_factory, said: str) -> list[str]:
    return [f.text for f in extract_facts([turn_factory(said)])]


@pytest.mark.parametrize(("said", "expected"), [
    ("My dogs are my world. I love them and how much joy they bring me.", ["The user loves their dogs."]),
    ("I have two dogs. I love them so much.", ["The user has two dogs.", "The user loves their dogs."]),
    ("I got a new bike last week. I love it!", ["The user loves their bike."]),
    ("I love checking out new parks with my four pups.",
     ["The user loves checking out new parks with their four pups."]),
    ("I love trying out new recipes and experimenting in the kitchen with my kids.",
     ["The user loves trying out new recipes and experimenting."]),
    ("I have a cat and a hamster. I love it.", ["The user has a cat."]),
    ("I moved to Lima two years ago and I love it there.", ["The user lives in Lima."]),
    ("I don't like chess anymore, I stopped last month.", ["The user does not like chess."]),  # "it": the cat or the hamster?
])
def test_what_the_turn_names_resolves_the_pronoun(turn_factory, said, expected):
    assert texts(turn_factory, said) == expected


@pytest.mark.parametrize(("said", "expected"), [
    # A demonstrative resolved from the turn instead of refused.
    ("I went to Griffith Park yesterday. I love this park so much", ["The user loves Griffith Park."]),
    ("Been listening to Khruangbin nonstop, i really like this band", ["The user likes Khruangbin."]),
    ("I love my new bike. I really like this bike", ["The user loves their new bike.", "The user likes their bike."]),
    ("my sister Rosa made tamales. i love her cooking", ["The user loves Rosa's cooking."]),
    # Real speech: a dash, chat filler, a time inside the phrase, a clause the word cap cut.
    ("i love going to griffith park near my house - i go to this park every day lol",
     ["The user loves going to griffith park near their house."]),
    ("i love ramen so much lol", ["The user loves ramen."]),
    ("i moved to austin last year for work, not a fan of the heat there tho", ["The user lives in austin."]),
    ("i hate when my phone dies in the middle of the day", ["The user hates when their phone dies."]),
    ("i hate when people are late and she was like an hour late haha", ["The user hates when people are late."]),
])
def test_real_speech_becomes_a_statement_that_reads_alone(turn_factory, said, expected):
    assert texts(turn_factory, said) == expected


@pytest.mark.parametrize("said", [
    "I love them.",
    "I love it when it rains.",
    "I love your commitment.",
    "I really like that about you.",
    "I love this place.",
    "My cat and my dogs are great. I love it.",
    "I like what you said earlier.",
    "I enjoy what I do.",
    "so good, she made tamales. i love her cooking",
    "theres this spot by the water i like to come to when im stressed - it's so calm",
    "I love going to this park near my house",
    "i just love being in places like this - it brings back memories",
    "my roommate Kevin keeps eating my leftovers, i hate when he does that",
    "Honestly I really love how you always know what to say to me!",  # about the character, not the user
    "I like it here in Lisbon, my favourite city.",
    "I enjoy the walks we take together with our neighbours in the park.",
])
def test_what_cannot_be_resolved_is_dropped(turn_factory, said):
    assert texts(turn_factory, said) == []


@pytest.mark.parametrize("said", [
    "I love my family and my garden, and I hate when they call me late.",
    "I love cooking for my friends on weekends because it relaxes me.",
    "I prefer coffee over tea, but my wife prefers tea.",
])
def test_every_rules_fact_is_self_contained(turn_factory, said):
    facts = texts(turn_factory, said)
    assert facts, "the rules backend keeps a fact from this turn: the check below must have something to judge"
    for text in facts:
        assert is_self_contained(text) == (True, ""), text


@pytest.mark.parametrize("said", ["i love her cooking", "i love going there", "I love them."])
def test_a_dropped_statement_is_counted_with_the_gates_stage_and_reason(turn_factory, said):
    """The rules backend's own gate drops reach /metrics (refusals.py), as the step labels them."""
    before = refusals.counts()
    assert texts(turn_factory, said) == []
    after = refusals.counts()
    grown = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
    assert grown == {"stage1:dangling_reference": 1}
    assert RulesBackend().refused() == after


def test_a_kept_fact_counts_no_refusal(turn_factory):
    before = refusals.counts()
    assert texts(turn_factory, "my sister Rosa made tamales. i love her cooking") == ["The user loves Rosa's cooking."]
    assert refusals.counts() == before
