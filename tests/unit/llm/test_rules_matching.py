import pytest

from credence.streams.llm.rules.matching import classify, rerank, target_check


@pytest.mark.parametrize(
    ("fact", "observation", "expected"),
    [
        (("The user loves coffee.", "coffee", "positive"), ("The user likes coffee.", "coffee"), "reinforce"),
        (("The user hates coffee.", "coffee", "negative"), ("The user likes coffee.", "coffee"), "negate"),
        (("The user likes coffee.", "coffee", "positive"), ("The user does not like coffee.", "coffee"), "negate"),
        (("The user hates tea.", "tea", "negative"), ("The user dislikes tea.", "tea"), "reinforce"),
        # Subject found in the observation's wording when its subject key differs.
        (("The user has two cats.", "cat", "positive"), ("The user has cats at home.", "pets"), "reinforce"),
        (("The user likes coffee.", "coffee", "positive"), ("The user likes tea.", "tea"), None),
        # Identity subjects hold one value: another value contradicts, the same value supports.
        (("The user lives in Paris.", "home", "positive"), ("The user lives in Berlin.", "home"), "negate"),
        (("The user lives in Berlin.", "home", "positive"), ("The user lives in Berlin.", "home"), "reinforce"),
        (("The user no longer lives in Berlin.", "home", "negative"), ("The user lives in Berlin.", "home"), "negate"),
        (("The user no longer lives in Berlin.", "home", "negative"), ("The user lives in Paris.", "home"), None),
        (("The user's name is Bob.", "name", "positive"), ("The user's name is Anna.", "name"), "negate"),
        # "home" is a key, not a word: it never matches an observation merely mentioning a home.
        (("The user lives in Berlin.", "home", "positive"), ("The user likes a tidy home.", "tidy home"), None),
    ],
)
def test_classification(fact_factory, observation_factory, fact, observation, expected):
    f = fact_factory(*fact)
    o = observation_factory(*observation)
    result = classify([f], [o])
    assert [c.relation for c in result] == ([expected] if expected else [])


def test_classify_covers_every_related_pair_in_input_order(fact_factory, observation_factory):
    coffee = fact_factory("The user loves coffee.", "coffee")
    tea = fact_factory("The user hates tea.", "tea", "negative")
    o1 = observation_factory("The user likes tea.", "tea")
    o2 = observation_factory("The user drinks coffee daily.", "coffee")
    o3 = observation_factory("The user has a dog.", "dog")
    pairs = [(c.fact_id, c.observation_id, c.relation) for c in classify([coffee, tea], [o1, o2, o3])]
    assert pairs == [(coffee.id, o2.id, "reinforce"), (tea.id, o1.id, "negate")]


def test_rerank_orders_by_overlap_and_respects_limit(fact_factory, observation_factory):
    facts = [fact_factory("The user loves dark coffee.", "dark coffee")]
    best = observation_factory("The user drinks dark coffee.", "dark coffee")
    some = observation_factory("The user likes coffee shops.", "coffee shops")
    none = observation_factory("The user has a dog.", "dog")
    assert rerank(facts, [none, some, best], limit=5) == [best.id, some.id]
    assert rerank(facts, [none, some, best], limit=1) == [best.id]


def test_target_check_picks_the_named_subject(observation_factory):
    coffee = observation_factory("The user likes coffee.", "coffee")
    dog = observation_factory("The user has a dog.", "dog")
    messages = ["hi", "what's up", "no, I never said I like coffee"]
    assert target_check(messages, [coffee, dog]) == [coffee.id]


def test_target_check_none_when_no_subject_is_named(observation_factory):
    coffee = observation_factory("The user likes coffee.", "coffee")
    assert target_check(["no, that's wrong"], [coffee]) == []
