"""The seed's Stage-2 budgets: each observation is capped, and so is the whole rendered prompt.

Token counting is pluggable so the real tokenizer of the served model can replace the approximation
without touching the fitting logic."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from credence.errors import LLMError
from credence.streams.llm.models import Fact, Observation
from credence.streams.llm.prompts import stage2_classification as stage2

CountTokens = Callable[[str], int]


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF  # hangul
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x2FA1F
    )


def approx_tokens(text: str) -> int:
    """ceil(1.5 per CJK character + 0.25 per other character): errs high for CJK, where one character
    is often more than one token, and matches ~4 characters per token elsewhere."""
    cjk = sum(1 for ch in text if _is_cjk(ch))
    return math.ceil(1.5 * cjk + 0.25 * (len(text) - cjk))


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
    observation_cap: int = 200,
    prompt_cap: int = 15_000,
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
            "send fewer facts per batch or raise CREDENCE_LLM__STAGE2_PROMPT_TOKEN_CAP"
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
