"""The LLM layer: one interface (LLMBackend, one generic `call`), two backends (rules offline default,
OpenAI-compatible server), one prompt module per task, and the Stage-2 token budget.

The backend is built by `credence.streams.llm.factory.make_backend`, not from here: importing this package
never reaches the HTTP backend."""

from credence.streams.llm.backend import LLMBackend, LLMStats
from credence.streams.llm.models import (
    Classification,
    Fact,
    FeedbackDecision,
    MergeDecision,
    Observation,
    ReflectionDraft,
    Turn,
)
from credence.streams.llm.token_budget import approx_tokens, fit_stage2

__all__ = [
    "Classification",
    "Fact",
    "FeedbackDecision",
    "LLMBackend",
    "LLMStats",
    "MergeDecision",
    "Observation",
    "ReflectionDraft",
    "Turn",
    "approx_tokens",
    "fit_stage2",
]
