import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.errors import LLMError
from credence.streams.llm.models import Fact, Observation
from credence.streams.llm.token_budget import (
    approx_tokens,
    fit_rerank,
    fit_stage2,
    rerank_prompt_tokens,
    stage2_prompt_tokens,
    trim_to_tokens,
)
from credence.tables.tokens import cl100k_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("", 0), ("abcd", 1), ("abcde", 2), ("\u4f60\u597d", 3), ("\u4f60\u597dab", 4), ("\u3053\u3093\u306b\u3061\u306f", 8)],
)
def test_approximation(text, tokens):
    assert approx_tokens(text) == tokens


def test_trim_keeps_the_longest_prefix_within_the_cap():
    text = "word " * 500
    trimmed = trim_to_tokens(text, 200)
    assert approx_tokens(trimmed) == 200 and text.startswith(trimmed)
    assert trim_to_tokens("short", 200) == "short"


FACTS = [Fact(id="f1", text="The user loves coffee.", subject="coffee", importance=8, polarity="positive",
              source_turn_ids=["t1"])]

texts = st.text(alphabet=st.sampled_from("ab cd\u4f60\u597d\u3053\u3093"), max_size=1500)


@settings(max_examples=60, deadline=None)
@given(
    obs_texts=st.lists(texts, max_size=40),
    observation_cap=st.integers(min_value=1, max_value=300),
    prompt_cap=st.integers(min_value=1000, max_value=6000),
)
def test_fitted_prompt_always_fits(obs_texts, observation_cap, prompt_cap):
    observations = [Observation(id=f"o{i}", text=t, subject="s") for i, t in enumerate(obs_texts)]
    kept = fit_stage2(FACTS, observations, observation_cap=observation_cap, prompt_cap=prompt_cap)
    assert stage2_prompt_tokens(FACTS, kept) <= prompt_cap
    assert all(approx_tokens(o.text) <= observation_cap for o in kept)
    # Lowest-ranked dropped first: what survives is a prefix, each text a prefix of the original.
    assert [o.id for o in kept] == [o.id for o in observations[: len(kept)]]
    assert all(orig.text.startswith(o.text) for o, orig in zip(kept, observations))
    # Nothing dropped that would have fitted.
    if len(kept) < len(observations):
        nxt = observations[len(kept)].model_copy(
            update={"text": trim_to_tokens(observations[len(kept)].text, observation_cap)})
        assert stage2_prompt_tokens(FACTS, [*kept, nxt]) > prompt_cap


@settings(max_examples=40, deadline=None)
@given(
    obs_texts=st.lists(texts, max_size=40),
    limit=st.integers(min_value=1, max_value=30),
    prompt_cap=st.integers(min_value=800, max_value=6000),
)
def test_rerank_input_respects_the_stage2_prompt_cap(obs_texts, limit, prompt_cap):
    observations = [Observation(id=f"o{i}", text=t, subject="s") for i, t in enumerate(obs_texts)]
    kept = fit_rerank(FACTS, observations, limit, observation_cap=200, prompt_cap=prompt_cap)
    assert rerank_prompt_tokens(FACTS, kept, limit) <= prompt_cap
    assert [o.id for o in kept] == [o.id for o in observations[: len(kept)]]
    assert all(approx_tokens(o.text) <= 200 for o in kept)


@settings(max_examples=50, deadline=None)
@given(obs_texts=st.lists(texts, max_size=20), factor=st.integers(min_value=1, max_value=3))
def test_pluggable_counter_is_the_one_obeyed(obs_texts, factor):
    def count(text: str) -> int:  # a stricter tokenizer than the default
        return factor * len(text)

    observations = [Observation(id=f"o{i}", text=t, subject="s") for i, t in enumerate(obs_texts)]
    fitted = fit_stage2(FACTS, observations, observation_cap=50, prompt_cap=8000, count_tokens=count)
    assert stage2_prompt_tokens(FACTS, fitted, count) <= 8000
    assert all(count(o.text) <= 50 for o in fitted)


def test_facts_alone_over_the_cap_is_an_error_that_says_what_to_do():
    many = [f.model_copy(update={"id": f"f{i}", "text": "x" * 400}) for i, f in enumerate(FACTS * 200)]
    with pytest.raises(LLMError, match="fewer facts per batch"):
        fit_stage2(many, [], prompt_cap=15_000)


cjk_texts = st.text(alphabet=st.sampled_from("ab cd\u4f60\u597d\u3053\u3093\U00020000\u00e9"), max_size=1500)


@settings(max_examples=60, deadline=None)
@given(obs_texts=st.lists(cjk_texts, max_size=30), observation_cap=st.integers(min_value=1, max_value=300),
       prompt_cap=st.integers(min_value=300, max_value=8000), limit=st.integers(min_value=1, max_value=20),
       counter=st.sampled_from([approx_tokens, cl100k_tokens]))
def test_skipping_the_count_when_the_bytes_fit_changes_no_result(obs_texts, observation_cap, prompt_cap, limit,
                                                                  counter):
    observations = [Observation(id=f"o{i}", text=t, subject="s") for i, t in enumerate(obs_texts)]
    counted = lambda text: counter(text)  # noqa: E731 - same counts, not known to at_most_bytes: always counted
    caps = {"observation_cap": observation_cap, "prompt_cap": prompt_cap}
    for fit, args in ((fit_stage2, ()), (fit_rerank, (limit,))):
        try:
            expected = fit(FACTS, observations, *args, count_tokens=counted, **caps)
        except LLMError:
            with pytest.raises(LLMError):
                fit(FACTS, observations, *args, count_tokens=counter, **caps)
            continue
        assert fit(FACTS, observations, *args, count_tokens=counter, **caps) == expected
