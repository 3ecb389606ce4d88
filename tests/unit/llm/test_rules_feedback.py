import pytest

from credence.streams.llm.rules.feedback import check_feedback


@pytest.mark.parametrize(
    ("reply", "decision"),
    [
        ("Yes!", "confirm"),
        ("right", "confirm"),
        ("Exactly.", "confirm"),
        ("That's true", "confirm"),
        ("That\u2019s true", "confirm"),
        ("no", "deny"),
        ("Not really", "deny"),
        ("wrong", "deny"),
        ("That's not true", "deny"),
        ("What's the weather tomorrow?", "ignore"),
        ("haha ok", "ignore"),
    ],
)
def test_cue_words(observation_factory, reply, decision):
    surfaced = [observation_factory("The user likes coffee.", "coffee")]
    assert [d.decision for d in check_feedback(reply, surfaced)] == [decision]


def test_reply_naming_one_reflection_leaves_the_others_ignored(observation_factory):
    coffee = observation_factory("The user likes coffee.", "coffee")
    dog = observation_factory("The user has a dog.", "dog")
    decisions = {d.id: d.decision for d in check_feedback("no, I don't have a dog", [coffee, dog])}
    assert decisions == {coffee.id: "ignore", dog.id: "deny"}


def test_one_decision_per_surfaced_reflection(observation_factory):
    surfaced = [observation_factory("The user likes coffee.", "coffee"), observation_factory("The user likes tea.", "tea")]
    assert [d.decision for d in check_feedback("yes", surfaced)] == ["confirm", "confirm"]
    assert check_feedback("yes", []) == []
