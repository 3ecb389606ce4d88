"""The lexical fallback for AI mentions: which entries an AI text names when the client sent no surfaced_ids."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.tables.mentions import content_words, mentioned_in


def test_content_words_drop_fillers_and_fold_inflections():
    assert content_words("The user loves hiking.") == {"lov", "hik"}
    assert content_words("You love to hike!") == content_words("you loved hiking") == {"lov", "hik"}
    assert content_words("The user has a dog named Rex") == {"dog", "nam", "rex"}


def test_an_entry_is_mentioned_when_enough_of_its_content_words_appear(reflection_factory, persona_factory):
    hiking = reflection_factory(text="The user loves hiking.")
    dog = persona_factory(text="The user has a dog named Rex.")
    tea = reflection_factory(text="The user likes green tea.")
    text = "How was hiking with Rex? I know you love it."
    assert mentioned_in(text, [hiking, dog, tea]) == [hiking]  # Rex alone (1 of 3 words) is not enough
    assert mentioned_in(text, [hiking, dog, tea], settings=MemorySettings(ai_mention_min_overlap=0.3)) == [hiking, dog]
    assert mentioned_in("Green tea again? You like it.", [hiking, dog, tea]) == [tea]
    assert mentioned_in("Nice weather today.", [hiking, dog, tea]) == []


def test_an_entry_without_content_words_is_never_mentioned(reflection_factory):
    assert mentioned_in("the user is", [reflection_factory(text="The user is.")]) == []


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(own=st.lists(WORDS, min_size=1, max_size=6), noise=st.lists(WORDS, max_size=10))
def test_an_entry_named_word_for_word_is_mentioned_whatever_else_is_said(reflection_factory, own, noise):
    entry = reflection_factory(text="The user " + " ".join(own))
    if not content_words(entry.text):
        return
    assert mentioned_in(" ".join(noise + own + noise), [entry]) == [entry]
    assert mentioned_in(" ".join(noise), [entry]) in ([], [entry])  # never raises, never invents others
