import pytest

from credence.streams.llm.rules.extraction import extract_facts


@pytest.mark.parametrize(
    ("said", "text", "subject", "polarity", "importance"),
    [
        ("I love coffee!", "The user loves coffee.", "coffee", "positive", 8),
        ("I really love coffee", "The user loves coffee.", "coffee", "positive", 9),
        ("I adore cats", "The user loves cats.", "cats", "positive", 8),
        ("I like Rust, but it is hard.", "The user likes Rust.", "rust", "positive", 6),
        ("I really like Rust", "The user likes Rust.", "rust", "positive", 7),
        ("I enjoy hiking in the mountains", "The user enjoys hiking in the mountains.", "hiking in the mountains",
         "positive", 6),
        ("I prefer tea to coffee", "The user prefers tea.", "tea", "positive", 6),
        ("I'm a big fan of jazz", "The user is a fan of jazz.", "jazz", "positive", 7),
        ("I am learning Rust", "The user is learning Rust.", "rust", "positive", 6),
        ("I\u2019m learning Japanese these days", "The user is learning Japanese.", "japanese", "positive", 6),
        ("My name is Anna Lee.", "The user's name is Anna Lee.", "name", "positive", 9),
        ("Call me Bob", "The user's name is Bob.", "name", "positive", 9),
        ("I live in Berlin now", "The user lives in Berlin.", "home", "positive", 9),
        ("I moved to Paris", "The user lives in Paris.", "home", "positive", 9),
        ("I work as a nurse.", "The user works as a nurse.", "occupation", "positive", 9),
        ("I am an engineer by profession", "The user works as an engineer.", "occupation", "positive", 9),
        ("I have a dog named Rex", "The user has a dog named Rex.", "dog", "positive", 7),
        ("I have two cats", "The user has two cats.", "cat", "positive", 7),
        ("I don't like coffee anymore.", "The user does not like coffee.", "coffee", "negative", 6),
        ("I do not enjoy football", "The user does not like football.", "football", "negative", 6),
        ("I hate Mondays", "The user hates Mondays.", "mondays", "negative", 8),
        ("I can't stand loud music", "The user hates loud music.", "loud music", "negative", 8),
        ("I dislike olives", "The user dislikes olives.", "olives", "negative", 6),
        ("I no longer eat meat", "The user says they no longer eat meat.", "meat", "negative", 6),
        ("I'm no longer learning Rust", "The user says they are no longer learning Rust.", "rust", "negative", 6),
        ("I no longer live in Berlin", "The user no longer lives in Berlin.", "home", "negative", 9),
        ("I stopped drinking coffee", "The user says they stopped drinking coffee.", "coffee", "negative", 6),
        ("I quit smoking", "The user says they quit smoking.", "smoking", "negative", 6),
    ],
)
def test_each_pattern_gives_one_fact(turn_factory, said, text, subject, polarity, importance):
    [fact] = extract_facts([turn_factory(said, turn_id="t1")])
    assert (fact.text, fact.subject, fact.polarity, fact.importance) == (text, subject, polarity, importance)
    assert fact.source_turn_ids == ["t1"]
    assert fact.origin == "user"


@pytest.mark.parametrize("said", ["How are you?", "I love you", "The weather is nice.", ""])
def test_statements_without_a_fact_give_none(turn_factory, said):
    assert extract_facts([turn_factory(said)]) == []


def test_ai_turns_never_become_facts(turn_factory):
    assert extract_facts([turn_factory("I love coffee", role="ai")]) == []


def test_several_statements_in_one_turn(turn_factory):
    facts = extract_facts([turn_factory("My name is Anna and I live in Berlin. I hate tea but I love coffee.")])
    assert [(f.subject, f.polarity) for f in facts] == [
        ("name", "positive"), ("home", "positive"), ("tea", "negative"), ("coffee", "positive"),
    ]


def test_same_input_same_facts_and_ids(turn_factory):
    turns = [turn_factory("I love coffee", turn_id="a"), turn_factory("I hate tea", turn_id="b")]
    assert extract_facts(turns) == extract_facts(list(turns))
    assert len({f.id for f in extract_facts(turns)}) == 2


def test_repeated_statement_in_one_turn_is_one_fact(turn_factory):
    assert len(extract_facts([turn_factory("I love coffee. I love coffee!")])) == 1


def test_same_statement_in_two_turns_is_two_facts(turn_factory):
    facts = extract_facts([turn_factory("I love coffee", turn_id="a"), turn_factory("I love coffee", turn_id="b")])
    assert [f.source_turn_ids for f in facts] == [["a"], ["b"]]


@pytest.mark.parametrize("said", ["Remember this: I hate olives", "Please remember that I live in Lyon",
                                  "Don't forget, I love jazz"])
def test_importance_ten_only_when_the_user_asks_to_remember(turn_factory, said):
    [fact] = extract_facts([turn_factory(said)])
    assert fact.importance == 10
    assert max(f.importance for f in extract_facts([turn_factory("My name is Sam. I really love hiking.")])) == 9
