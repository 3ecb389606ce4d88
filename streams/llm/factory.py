"""Choosing the backend from settings."""

from __future__ import annotations

from credence.config.llm import LLMSettings
from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.errors import ConfigError
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.token_budget import CountTokens, approx_tokens


def make_backend(settings: LLMSettings, *, count_tokens: CountTokens = approx_tokens,
                 memory: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> LLMBackend:
    """The Stage-2 caps are the seed's, from the memory settings (one place for each number)."""
    caps = dict(observation_cap=memory.stage2_observation_max_tokens, prompt_cap=memory.stage2_max_prompt_tokens)
    if settings.backend == "openai":
        if not settings.model:
            raise ConfigError(
                "CREDENCE_LLM__BACKEND=openai needs CREDENCE_LLM__MODEL set to the served model name "
                "(vLLM --served-model-name)"
            )
        from credence.streams.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(settings, count_tokens=count_tokens, **caps)
    from credence.streams.llm.rules.backend import RulesBackend

    return RulesBackend(count_tokens=count_tokens, **caps)
