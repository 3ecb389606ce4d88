"""The seed's Stage-2 budgets: each observation is capped, and so is the whole rendered prompt.

Token counting is pluggable so the real tokenizer of the served model can replace the approximation
without touching the fitting logic."""

from __future__ import annotations

from collections.abc import Sequence

from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.errors import LLMError
from credence.streams.llm.models import Fact, Observation
from credence.streams.llm.prompts import stage2_classification as stage2
from credence.tables.tokens import TokenCounter as CountTokens
from credence.tables.tokens import approximate_tokens as approx_tokens


def trim_to_tokens(text: str, cap: int, count_tokens: CountTokens = approx_tokens) -> str:
    """The longest prefix of text within cap tokens (binary search: counting is monotone in length)."""
    if count_tokens(text) <= cap:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def stage2_input(facts: Sequence[Fact], observations: Sequence[Observation]) -> stage2.Input:
    return stage2.Input(
        facts=stage2.fact_refs(facts),
        observations=list(observations),
    )


def stage2_prompt_tokens(payload: stage2.Input, count_tokens: CountTokens = approx_tokens) -> int:
    return count_tokens(stage2.SYSTEM) + count_tokens(stage2.render_user(payload))


def fit_stage2(
    facts: Sequence[Fact],
    observations: Sequence[Observation],
    *,
    observation_cap: int = SEED_CAPS.stage2_observation_max_tokens,
    prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens,
    count_tokens: CountTokens = approx_tokens,
) -> stage2.Input:
    """The Stage-2 input that fits both caps. Observations arrive best-ranked first; each text is trimmed
    to observation_cap, then the lowest-ranked are dropped until the rendered prompt fits prompt_cap.
    Raises LLMError when the facts alone do not fit, since only the caller can split the batch."""
    trimmed = [
        obs.model_copy(update={"text": trim_to_tokens(obs.text, observation_cap, count_tokens)})
        for obs in observations
    ]
    bare = stage2_input(facts, [])
    if stage2_prompt_tokens(bare, count_tokens) > prompt_cap:
        raise LLMError(
            f"Stage-2 batch of {len(facts)} facts alone exceeds the {prompt_cap}-token prompt cap; "
            "send fewer facts per batch (CREDENCE_MEMORY__STAGE2_MAX_FACTS_PER_BATCH) or raise "
            "CREDENCE_MEMORY__STAGE2_MAX_PROMPT_TOKENS"
        )
    # Binary search on how many observations to keep: the prompt grows with every one added.
    lo, hi = 0, len(trimmed)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if stage2_prompt_tokens(stage2_input(facts, trimmed[:mid]), count_tokens) <= prompt_cap:
            lo = mid
        else:
            hi = mid - 1
    return stage2_input(facts, trimmed[:lo])
