from credence.streams.llm.models import ReflectionDraft
from credence.streams.llm.rules.synthesis import merge_decision, synthesize


def test_facts_group_by_subject_and_the_latest_states_it(fact_factory):
    old = fact_factory("The user likes coffee.", "coffee")
    dog = fact_factory("The user has a dog.", "dog")
    new = fact_factory("The user does not like coffee.", "coffee", "negative")
    drafts = synthesize([old, dog, new])
    assert [(d.text, d.subject, d.source_fact_ids) for d in drafts] == [
        ("The user does not like coffee.", "coffee", [old.id, new.id]),
        ("The user has a dog.", "dog", [dog.id]),
    ]


def test_plural_and_singular_subjects_group(fact_factory):
    drafts = synthesize([fact_factory("The user has two cats.", "cats"), fact_factory("The user loves cat.", "cat")])
    assert len(drafts) == 1


def _draft(text: str, subject: str) -> ReflectionDraft:
    return ReflectionDraft(text=text, subject=subject, source_fact_ids=["f1"])


def test_merge_into_an_entry_with_the_same_subject(observation_factory):
    entry = observation_factory("The user likes coffee.", "coffee")
    decision = merge_decision(_draft("The user loves coffee.", "coffee"), [entry])
    assert (decision.action, decision.target_id, decision.text) == ("merge", entry.id, "The user loves coffee.")


def test_create_when_no_entry_shares_the_subject(observation_factory):
    decision = merge_decision(_draft("The user loves coffee.", "coffee"), [observation_factory("The user has a dog.", "dog")])
    assert (decision.action, decision.target_id) == ("create", None)


def test_reject_empty_or_contradicting(observation_factory):
    entry = observation_factory("The user likes coffee.", "coffee")
    assert merge_decision(_draft("  ", "coffee"), [entry]).action == "reject"
    assert merge_decision(_draft("The user hates coffee.", "coffee"), [entry]).action == "reject"
