"""The seed's Stage-2 budgets: each observation is capped, and so is the whole rendered prompt — of the
Stage-2 call and of the rerank call that picks its candidates.

Token counting is pluggable so the real tokenizer of the served model can replace the approximation
without touching the fitting logic."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.errors import LLMError
from credence.streams.llm.models import Fact, Observation
from credence.streams.llm.prompts import candidate_rerank as rerank
from credence.streams.llm.prompts import stage2_classification as stage2
from credence.tables.tokens import TokenCounter as CountTokens
from credence.tables.tokens import approximate_tokens as approx_tokens
from credence.tables.tokens import at_most_bytes


def trim_to_tokens(text: str, cap: int, count_tokens: CountTokens = approx_tokens) -> str:
    """The longest prefix of text within cap tokens (binary search: counting is monotone in length)."""
    if at_most_bytes(count_tokens) and len(text.encode()) <= cap or count_tokens(text) <= cap:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def stage2_prompt_tokens(facts: Sequence[Fact], observations: Sequence[Observation],
                         count_tokens: CountTokens = approx_tokens) -> int:
    """Tokens of the Stage-2 request exactly as sent (system prefix + aliased input)."""
    payload = stage2.build(facts, observations).payload
    return count_tokens(stage2.SYSTEM) + count_tokens(stage2.render_user(payload))


def stage2_prompt_bytes(facts: Sequence[Fact], observations: Sequence[Observation]) -> int:
    """UTF-8 bytes of the same request: a bound on its tokens for the counters of `at_most_bytes`."""
    payload = stage2.build(facts, observations).payload
    return len(stage2.SYSTEM.encode()) + len(stage2.render_user(payload).encode())


def rerank_prompt_bytes(facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> int:
    payload = rerank.build(facts, observations, limit).payload
    return len(rerank.SYSTEM.encode()) + len(rerank.render_user(payload).encode())


def rerank_prompt_tokens(facts: Sequence[Fact], observations: Sequence[Observation], limit: int,
                         count_tokens: CountTokens = approx_tokens) -> int:
    payload = rerank.build(facts, observations, limit).payload
    return count_tokens(rerank.SYSTEM) + count_tokens(rerank.render_user(payload))


def fit_observations(
    facts: Sequence[Fact],
    observations: Sequence[Observation],
    prompt_tokens: Callable[[Sequence[Observation]], int],
    *,
    observation_cap: int,
    prompt_cap: int,
    count_tokens: CountTokens = approx_tokens,
    prompt_bytes: Callable[[Sequence[Observation]], int] | None = None,
) -> list[Observation]:
    """The candidates that fit both caps. Observations arrive best-ranked first; each text is trimmed to
    observation_cap, then the lowest-ranked are dropped until the rendered prompt fits prompt_cap.
    Raises LLMError when the facts alone do not fit, since only the caller can split the batch.
    `prompt_bytes` (the rendered prompt's UTF-8 bytes) spares the count when that alone shows a fit."""
    trimmed = [
        obs.model_copy(update={"text": trim_to_tokens(obs.text, observation_cap, count_tokens)})
        for obs in observations
    ]
    # The usual case: everything fits. Bytes bound the tokens (at_most_bytes); else one count settles it,
    # as the prompt only grows with each observation kept.
    if prompt_bytes is not None and at_most_bytes(count_tokens) and prompt_bytes(trimmed) <= prompt_cap:
        return trimmed
    if prompt_tokens(trimmed) <= prompt_cap:
        return trimmed
    if prompt_tokens([]) > prompt_cap:
        raise LLMError(
            f"Stage-2 batch of {len(facts)} facts alone exceeds the {prompt_cap}-token prompt cap; "
            "send fewer facts per batch (CREDENCE_MEMORY__STAGE2_MAX_FACTS_PER_BATCH) or raise "
            "CREDENCE_MEMORY__STAGE2_MAX_PROMPT_TOKENS"
        )
    # Binary search on how many observations to keep: the prompt grows with every one added.
    lo, hi = 0, len(trimmed)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if prompt_tokens(trimmed[:mid]) <= prompt_cap:
            lo = mid
        else:
            hi = mid - 1
    return trimmed[:lo]


def fit_stage2(
    facts: Sequence[Fact],
    observations: Sequence[Observation],
    *,
    observation_cap: int = SEED_CAPS.stage2_observation_max_tokens,
    prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens,
    count_tokens: CountTokens = approx_tokens,
) -> list[Observation]:
    """The Stage-2 candidates within the seed's caps."""
    return fit_observations(
        facts, observations, lambda obs: stage2_prompt_tokens(facts, obs, count_tokens),
        observation_cap=observation_cap, prompt_cap=prompt_cap, count_tokens=count_tokens,
        prompt_bytes=lambda obs: stage2_prompt_bytes(facts, obs),
    )


def fit_rerank(
    facts: Sequence[Fact],
    observations: Sequence[Observation],
    limit: int,
    *,
    observation_cap: int = SEED_CAPS.stage2_observation_max_tokens,
    prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens,
    count_tokens: CountTokens = approx_tokens,
) -> list[Observation]:
    """The rerank candidates within the same caps: the internal selector is a Stage-2 prompt too."""
    return fit_observations(
        facts, observations, lambda obs: rerank_prompt_tokens(facts, obs, limit, count_tokens),
        observation_cap=observation_cap, prompt_cap=prompt_cap, count_tokens=count_tokens,
        prompt_bytes=lambda obs: rerank_prompt_bytes(facts, obs, limit),
    )
