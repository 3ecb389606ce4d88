"""Stage 1 and Stage 2 of the rules backend on the ways people correct what they said: the new value is a
fact of its own, the old one is taken back, and a rename never reinforces the old name."""

import pytest

from credence.streams.llm.rules.extraction import extract_facts
from credence.streams.llm.rules.matching import classify


def facts(said: str, turn_factory) -> list[tuple[str, str, str]]:
    return [(f.text, f.subject, f.polarity) for f in extract_facts([turn_factory(said)])]


@pytest.mark.parametrize(("said", "expected"), [
    ("I don't live in Berlin anymore, I live in Lisbon now.",
     [("The user does not live in Berlin.", "home", "negative"), ("The user lives in Lisbon.", "home", "positive")]),
    ("I don't drink coffee anymore.", [("The user no longer drinks coffee.", "coffee", "negative")]),
    ("I quit coffee last week.", [("The user says they quit coffee.", "coffee", "negative")]),
    ("Sorry, I said it wrong before: my cat's name is Miso, not Mitten.",
     [("The user has a cat named Miso.", "cat", "positive"), ("The user's cat is not named Mitten.", "cat", "negative")]),
    ("My cat isn't called Mitten, she's called Miso.",
     [("The user has a cat named Miso.", "cat", "positive"), ("The user's cat is not named Mitten.", "cat", "negative")]),
    ("No, that's wrong. I don't work as a nurse anymore, I quit.",
     [("The user does not work as a nurse.", "occupation", "negative")]),
    ("I'm not a nurse anymore.", [("The user is no longer a nurse.", "nurse", "negative")]),
    ("I don't have a car anymore", [("The user no longer has a car.", "car", "negative")]),
    ("I moved to Lisbon in May.", [("The user lives in Lisbon.", "home", "positive")]),  # when, not where
    # "not X but Y": the new value, and the old one taken back.
    ("I like dogs, not cats.", [("The user likes dogs.", "dogs", "positive"),
                                ("The user does not like cats.", "cats", "negative")]),
    ("I live in Porto now, not Madrid.", [("The user lives in Porto.", "home", "positive"),
                                          ("The user does not live in Madrid.", "home", "negative")]),
    ("I'm learning Spanish, not French.", [("The user is learning Spanish.", "spanish", "positive"),
                                           ("The user is not learning French.", "french", "negative")]),
    ("I do not enjoy football", [("The user does not like football.", "football", "negative")]),
    ("I don't like tea, not at all.", [("The user does not like tea.", "tea", "negative")]),
    # No claim of the user's: hypotheticals and someone else's words.
    ("If I ever quit coffee, I'd be grumpy all day.", []),
    ("What if I stopped eating sushi?", []),
    ("My friend told me: I quit coffee last week.", []),
    ("My sister says she doesn't like coffee anymore.", []),
    ('My brother said "I don\'t live in Berlin anymore".', []),
    # Not corrections: left to the general patterns (or to nothing).
    ("I don't know anymore", []),
    ("I love you, I think", []),
])
def test_correction_phrasing(turn_factory, said, expected):
    assert facts(said, turn_factory) == expected


@pytest.mark.parametrize(("fact", "observation", "expected"), [
    # A renamed pet: the new name says nothing of the old (a second cat is possible); "not Mitten" negates it.
    (("The user has a cat named Miso.", "cat", "positive"), ("The user has a cat named Mitten.", "cat"), None),
    (("The user's cat is not named Mitten.", "cat", "negative"), ("The user has a cat named Mitten.", "cat"), "negate"),
    (("The user's cat is not named Mitten.", "cat", "negative"), ("The user has a cat named Miso.", "cat"), None),
    # An exclusive subject read from the observation's wording when synthesis keyed it otherwise.
    (("The user lives in Lisbon.", "home", "positive"), ("The user loves living in Berlin.", "living in berlin"),
     "negate"),
    # Taking back an occupation said another way.
    (("The user is no longer a nurse.", "nurse", "negative"),
     ("The user works as a nurse at the city hospital.", "occupation"), "negate"),
    (("The user does not work as a nurse.", "occupation", "negative"),
     ("The user works as a nurse at the city hospital.", "occupation"), "negate"),
    (("The user no longer drinks coffee.", "coffee", "negative"), ("The user loves coffee.", "coffee"), "negate"),
    # A positive fact never takes back an occupation it does not name.
    (("The user is learning nursing.", "nursing", "positive"), ("The user works as a nurse.", "occupation"), None),
    # The same value said with more detail restates it ("I work as a nurse." three days before "I work as a
    # nurse at the hospital." left the user's own job disputed); another value still contradicts it.
    (("The user works as a nurse at the hospital.", "occupation", "positive"), ("The user works as a nurse.", "occupation"),
     "reinforce"),
    (("The user lives in Berlin near the river.", "home", "positive"), ("The user lives in Berlin.", "home"), "reinforce"),
    (("The user works as a teacher at the hospital.", "occupation", "positive"),
     ("The user works as a nurse at the hospital.", "occupation"), "negate"),
    (("The user works as a teacher at the hospital.", "occupation", "positive"), ("The user works as a nurse.", "occupation"),
     "negate"),
])
def test_correction_classification(fact_factory, observation_factory, fact, observation, expected):
    result = classify([fact_factory(*fact)], [observation_factory(*observation)])
    assert [c.relation for c in result] == ([expected] if expected else [])
