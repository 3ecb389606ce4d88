"""The seed's Stage-2 budgets: each observation is capped, and so is the whole rendered prompt — of the
Stage-2 call and of the rerank call that picks its candidates.

Token counting is pluggable so the real tokenizer of the served model can replace the approximation
without touching the fitting logic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.errors import LLMError
from credence.streams.llm.models import Fact, Observation
from credence.streams.llm.prompts import candidate_rerank as rerank
from credence.streams.llm.prompts import stage2_classification as stage2
from credence.tables.tokens import TokenCounter as CountTokens
from credence.tables.tokens import approximate_tokens as approx_tokens
from credence.tables.tokens import at_most_bytes


def within(parts: Sequence[str], cap: int, count_tokens: CountTokens = approx_tokens) -> bool:
    """Whether the texts together are within cap tokens. Their UTF-8 bytes settle it uncounted when they
    fit, for the counters that never give more tokens than bytes (tables/tokens.at_most_bytes)."""
    if at_most_bytes(count_tokens) and sum(len(p.encode()) for p in parts) <= cap:
        return True
    return sum(count_tokens(p) for p in parts) <= cap


def trim_to_tokens(text: str, cap: int, count_tokens: CountTokens = approx_tokens) -> str:
    """The longest prefix of text within cap tokens (binary search: counting is monotone in length)."""
    if within((text,), cap, count_tokens):
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def stage2_prompt(facts: Sequence[Fact], observations: Sequence[Observation]) -> tuple[str, str]:
    """The Stage-2 request exactly as sent: system prefix and aliased input."""
    return stage2.SYSTEM, stage2.render_user(stage2.build(facts, observations).payload)


def rerank_prompt(facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> tuple[str, str]:
    return rerank.SYSTEM, rerank.render_user(rerank.build(facts, observations, limit).payload)


def stage2_prompt_tokens(facts: Sequence[Fact], observations: Sequence[Observation],
                         count_tokens: CountTokens = approx_tokens) -> int:
    return sum(count_tokens(part) for part in stage2_prompt(facts, observations))


def rerank_prompt_tokens(facts: Sequence[Fact], observations: Sequence[Observation], limit: int,
                         count_tokens: CountTokens = approx_tokens) -> int:
    return sum(count_tokens(part) for part in rerank_prompt(facts, observations, limit))


def fit_observations(
    facts: Sequence[Fact],
    observations: Sequence[Observation],
    prompt: Callable[[Sequence[Observation]], Sequence[str]],
    *,
    observation_cap: int,
    prompt_cap: int,
    count_tokens: CountTokens = approx_tokens,
) -> list[Observation]:
    """The candidates that fit both caps. Observations arrive best-ranked first; each text is trimmed to
    observation_cap, then the lowest-ranked are dropped until the rendered prompt fits prompt_cap.
    Raises LLMError when the facts alone do not fit, since only the caller can split the batch."""
    trimmed = [
        obs.model_copy(update={"text": trim_to_tokens(obs.text, observation_cap, count_tokens)})
        for obs in observations
    ]

    def fits(kept: Sequence[Observation]) -> bool:
        return within(prompt(kept), prompt_cap, count_tokens)

    if fits(trimmed):
        return trimmed  # the usual case; the prompt only grows with each observation kept
    if not fits([]):
        raise LLMError(
            f"Stage-2 batch of {len(facts)} facts alone exceeds the {prompt_cap}-token prompt cap; "
            "send fewer facts per batch (CREDENCE_MEMORY__STAGE2_MAX_FACTS_PER_BATCH) or raise "
            "CREDENCE_MEMORY__STAGE2_MAX_PROMPT_TOKENS"
        )
    # Binary search on how many observations to keep.
    lo, hi = 0, len(trimmed)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(trimmed[:mid]):
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
        facts, observations, lambda obs: stage2_prompt(facts, obs),
        observation_cap=observation_cap, prompt_cap=prompt_cap, count_tokens=count_tokens,
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
        facts, observations, lambda obs: rerank_prompt(facts, obs, limit),
        observation_cap=observation_cap, prompt_cap=prompt_cap, count_tokens=count_tokens,
    )


@dataclass(frozen=True)
class Budget:
    """The Stage-2 caps (the seed's unless the memory settings say otherwise) and the token counter: what
    a Stage-2 or rerank build fits its candidates to (`fit=`), on every backend alike."""

    observation_cap: int = SEED_CAPS.stage2_observation_max_tokens
    prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens
    count_tokens: CountTokens = approx_tokens

    def stage2(self, facts: Sequence[Fact], observations: Sequence[Observation]) -> list[Observation]:
        return fit_stage2(facts, observations, observation_cap=self.observation_cap, prompt_cap=self.prompt_cap,
                          count_tokens=self.count_tokens)

    def rerank(self, facts: Sequence[Fact], observations: Sequence[Observation], limit: int) -> list[Observation]:
        return fit_rerank(facts, observations, limit, observation_cap=self.observation_cap,
                          prompt_cap=self.prompt_cap, count_tokens=self.count_tokens)
