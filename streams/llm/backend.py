"""The one interface every LLM backend implements: one generic `call` of a prompt module's prepared call."""

from __future__ import annotations

import abc
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

from credence.streams.llm.prompts.base import Call
from credence.streams.llm.token_budget import Budget


@dataclass
class LLMStats:
    """Counters the pipeline reports. calls = task invocations; retries = extra attempts after a
    failure; failures = calls that ended in LLMError; unknown_ids = output items dropped because they
    named an id the call never offered (the rest of that answer was applied)."""

    calls: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unknown_ids: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class LLMBackend(abc.ABC):
    # True for a backend that computes in the worker's own process, with no I/O (rules): its answer is
    # ready as soon as it is asked for.
    in_process: bool = False
    # The Stage-2 caps the prompts that carry candidates are fitted to (the same for every backend, so
    # both see the same candidates); each backend sets its own from the settings.
    budget: Budget = Budget()

    @property
    @abc.abstractmethod
    def label(self) -> str:
        """How the backend shows itself in logs, stats and the UI."""

    @property
    @abc.abstractmethod
    def stats(self) -> LLMStats: ...

    @property
    def concurrency_limit(self) -> int | None:
        """Requests the backend lets into flight now (adaptive for a model server); None: unbounded."""
        return None

    @abc.abstractmethod
    async def call(self, prompt: ModuleType, call: Call) -> Any:
        """The answer to one prepared call (`prompt.build(...)`), read back into the layer's records:
        what `call.read` returns for the prompt's Output."""

    async def ask(self, prompt: ModuleType, *inputs: Any, **options: Any) -> Any:
        """`call` of `prompt.build(*inputs, **options)`: one prompt asked with the build's arguments."""
        return await self.call(prompt, prompt.build(*inputs, **options))

    async def aclose(self) -> None:
        """Release connections; the default holds none."""
