"""Choosing the backend from settings."""

from __future__ import annotations

from credence.config.llm import LLMSettings
from credence.errors import ConfigError
from credence.streams.llm.backend import LLMBackend
from credence.streams.llm.token_budget import CountTokens, approx_tokens


def make_backend(settings: LLMSettings, *, count_tokens: CountTokens = approx_tokens) -> LLMBackend:
    if settings.backend == "openai":
        if not settings.model:
            raise ConfigError(
                "CREDENCE_LLM__BACKEND=openai needs CREDENCE_LLM__MODEL set to the served model name "
                "(vLLM --served-model-name)"
            )
        from credence.streams.llm.openai_backend import OpenAIBackend

        return OpenAIBackend(settings, count_tokens=count_tokens)
    from credence.streams.llm.rules.backend import RulesBackend

    return RulesBackend(
        observation_cap=settings.stage2_observation_token_cap,
        prompt_cap=settings.stage2_prompt_token_cap,
        count_tokens=count_tokens,
    )
