"""LLM backend settings: which backend, the OpenAI-compatible server, concurrency, timeouts, retries."""

from pydantic import BaseModel, ConfigDict


class LLMSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
