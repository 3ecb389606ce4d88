"""The deterministic offline backend: no network, same answers for the same input, every time. Its
answer to a call is the call's prompt's own `rules_answer` (its prompt module wires the logic of this
package to the prompt's bounds), computed in process."""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.errors import LLMError
from credence.streams.llm.backend import LLMBackend, LLMStats
from credence.streams.llm.prompts.base import Call
from credence.streams.llm.rules import refusals
from credence.streams.llm.token_budget import Budget, CountTokens, approx_tokens

log = logging.getLogger(__name__)

LABEL = "rules (offline fallback — no LLM server configured)"


class RulesBackend(LLMBackend):
    in_process = True

    def __init__(
        self,
        *,
        observation_cap: int = SEED_CAPS.stage2_observation_max_tokens,
        prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens,
        count_tokens: CountTokens = approx_tokens,
    ) -> None:
        self._stats = LLMStats()
        self.budget = Budget(observation_cap, prompt_cap, count_tokens)
        log.warning(
            "LLM backend: %s; extraction and classification are pattern-based. "
            "Set CREDENCE_LLM__BACKEND=openai and CREDENCE_LLM__BASE_URL to use a model server.",
            LABEL,
        )

    @property
    def label(self) -> str:
        return LABEL

    def refused(self) -> dict[str, int]:
        """"<stage>:<reason>" -> statements this process's rules dropped by the self-containment gate
        before answering (refusals.py); /metrics adds them to the step's own refusals."""
        return refusals.counts()

    @property
    def stats(self) -> LLMStats:
        return self._stats

    async def call(self, prompt: ModuleType, call: Call) -> Any:
        answer = getattr(prompt, "rules_answer", None)
        if answer is None:
            raise LLMError(f"the rules backend has no answer to prompt {prompt.NAME}: its module defines "
                           "no rules_answer")
        self._stats.calls += 1
        return answer(*call.inputs)
