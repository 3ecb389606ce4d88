"""Any OpenAI-compatible chat-completions server (production: vLLM) with structured output.

Every request carries the task's constant system prefix (rules and worked examples; the server's prefix
cache serves it), the variable input in the user message, and a strict JSON schema built for that call
(ids an enum of the call's short aliases, lists bounded), the task's max_tokens, and temperature 0.
Transient failures — 429, 5xx, timeouts, connection errors, malformed JSON, schema-invalid output —
are retried with exponential backoff and full jitter; each retry samples warmer and, after unusable
content, carries a repair hint, so no retry repeats the failed request byte for byte. Output naming an
id the call never offered is dropped item by item and counted (stats.unknown_ids), never a failure.
Anything else, or the last failed retry, raises LLMError."""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from types import ModuleType
from typing import Any

import aiohttp
import orjson
from pydantic import ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_random_exponential

from credence import tracing
from credence.config.llm import LLMSettings
from credence.config.memory import DEFAULT_MEMORY_SETTINGS as SEED_CAPS  # the seed's Stage-2 caps
from credence.errors import ConfigError, LLMError, LLMUnavailable
from credence.streams.llm.aliases import Reader
from credence.streams.llm.backend import LLMBackend, LLMStats
from credence.streams.llm.concurrency import NEUTRAL, OK, OVERLOAD, AdaptiveGate, AIMDLimit
from credence.streams.llm.http_client import ChatClient, Reply
from credence.streams.llm.openai_parsing import (
    TransientFailure,
    attempt_temperature,
    message_content,
    repair_hint,
)
from credence.streams.llm.prompts import PROMPTS
from credence.streams.llm.prompts.base import Call, call_schema, schema_name
from credence.streams.llm.token_budget import Budget, CountTokens, approx_tokens

log = logging.getLogger(__name__)


def response_format(module: ModuleType, call: Call) -> dict[str, Any]:
    """The structured-output request for one call, as vLLM and OpenAI accept it."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema_name(module.NAME, module.VERSION),
            "schema": call_schema(module.Output, call.enums, call.max_items),
            "strict": True,
        },
    }


def _retry_after(response: Reply) -> float | None:
    try:
        return float(response.retry_after)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


class OpenAIBackend(LLMBackend):
    def __init__(self, settings: LLMSettings, *, count_tokens: CountTokens = approx_tokens,
                 observation_cap: int = SEED_CAPS.stage2_observation_max_tokens,
                 prompt_cap: int = SEED_CAPS.stage2_max_prompt_tokens) -> None:
        unknown = sorted(set(settings.models) - set(PROMPTS))
        if unknown:
            raise ConfigError(f"CREDENCE_LLM__MODELS names unknown prompts {unknown}; the prompts are {sorted(PROMPTS)}")
        self._settings = settings
        self.budget = Budget(observation_cap, prompt_cap, count_tokens)
        self._stats = LLMStats()
        headers = {"Authorization": f"Bearer {settings.api_key.get_secret_value()}"} if settings.api_key else {}
        # One kept client: connections are reused across calls, which a per-call client would not do;
        # every connection the limit may use stays alive between calls.
        self._client = ChatClient(settings.base_url, headers, settings.timeout_s, settings.max_concurrency)
        self._gate = AdaptiveGate(AIMDLimit(minimum=min(settings.min_concurrency, settings.max_concurrency),
                                            maximum=settings.max_concurrency, limit=settings.initial_concurrency))
        self._jitter = wait_random_exponential(multiplier=settings.backoff_base_s, max=settings.backoff_max_s)

    @property
    def label(self) -> str:
        tiers = "".join(f", {task}: {model}" for task, model in sorted(self._settings.models.items()))
        return f"openai-compatible ({self._settings.model}{tiers} at {self._settings.base_url})"

    @property
    def stats(self) -> LLMStats:
        return self._stats

    @property
    def concurrency_limit(self) -> int:
        return self._gate.limit

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- the call path -------------------------------------------------------------------------

    def _body(self, module: ModuleType, call: Call, attempt: int, failure: TransientFailure | None) -> dict[str, Any]:
        # A retry never repeats the failed request: warmer, seeded by its attempt number, and after
        # unusable content with a repair hint (a deterministic server would return the same answer).
        retry = {"seed": attempt} if attempt > 1 else {}
        return retry | {
            "model": self._settings.models.get(module.NAME, self._settings.model),
            "messages": [
                {"role": "system", "content": module.SYSTEM},
                {"role": "user", "content": repair_hint(failure) + module.render_user(call.payload)},
            ],
            "temperature": attempt_temperature(attempt),
            "max_tokens": module.MAX_TOKENS,
            "response_format": response_format(module, call),
        }

    def _wait(self, state: RetryCallState) -> float:
        # Honour a server's Retry-After, but never beyond the configured ceiling.
        exc = state.outcome.exception() if state.outcome else None
        hint = exc.retry_after if isinstance(exc, TransientFailure) and exc.retry_after else 0.0
        return max(min(hint, self._settings.backoff_max_s), self._jitter(state))

    def _before_sleep(self, state: RetryCallState) -> None:
        self._stats.retries += 1
        _count(2, 1)
        exc = state.outcome.exception() if state.outcome else None
        log.info("LLM attempt %d failed (%s); retrying", state.attempt_number, exc)

    async def _call(self, module: ModuleType, call: Call) -> Any:
        if not tracing.active():
            return await self._call_with_retries(module, call)
        # OpenTelemetry's GenAI conventions: the model, the task, tokens in and out, the outcome and the
        # retries; never the prompt or the answer (they hold users' words)
        model = self._settings.models.get(module.NAME, self._settings.model)  # the task's tier
        with tracing.span(f"chat {model}", tracing.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": model, "credence.llm.task": module.NAME}) as span:
            usage = [0, 0, 0]  # this call's tokens in, out and retries (the stats are shared by every call)
            token = _CALL_USAGE.set(usage)
            outcome = "ok"
            try:
                return await self._call_with_retries(module, call)
            except LLMUnavailable as exc:
                outcome = "unavailable"
                tracing.failed(span, exc)
                raise
            except Exception as exc:
                outcome = "refused" if isinstance(exc, LLMError) else "error"
                tracing.failed(span, exc)
                raise
            finally:
                _CALL_USAGE.reset(token)
                span.set_attributes({"gen_ai.usage.input_tokens": usage[0], "gen_ai.usage.output_tokens": usage[1],
                                     "credence.llm.retries": usage[2], "credence.llm.outcome": outcome})

    async def _call_with_retries(self, module: ModuleType, call: Call) -> Any:
        self._stats.calls += 1
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._settings.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(TransientFailure),
            before_sleep=self._before_sleep,
            reraise=True,
        )
        failure: TransientFailure | None = None
        try:
            async for attempt in retrying:
                with attempt:
                    body = self._body(module, call, attempt.retry_state.attempt_number, failure)
                    try:
                        out = await self._attempt(module, body)
                    except TransientFailure as exc:
                        failure = exc
                        raise
                    reader = Reader(module.NAME)
                    result = call.read(out, reader)
                    self._stats.unknown_ids += len(reader.dropped)
                    return result
        except TransientFailure as exc:
            self._stats.failures += 1
            raise LLMUnavailable(
                f"LLM task {module.NAME} failed after {self._settings.max_retries + 1} attempts against "
                f"{self._settings.base_url} (model {self._settings.model!r}); last error: {exc}. Check that the "
                "OpenAI-compatible server is up and not overloaded, or raise CREDENCE_LLM__TIMEOUT_S / "
                "CREDENCE_LLM__MAX_RETRIES."
            ) from exc
        except LLMError:
            self._stats.failures += 1
            raise
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def _attempt(self, module: ModuleType, body: dict[str, Any]) -> Any:
        async with self._gate.slot() as report:
            try:
                response = await self._client.post("chat/completions", orjson.dumps(body))
            except TimeoutError as exc:  # asyncio's, which aiohttp's read and connect timeouts are
                report.outcome = OVERLOAD
                raise TransientFailure(f"timed out after {self._settings.timeout_s}s ({type(exc).__name__})") from exc
            except aiohttp.ClientError as exc:
                raise TransientFailure(f"connection error: {exc!r}") from exc
            # Only "too busy" lowers the limit; another error says nothing of the server's load.
            report.outcome = OVERLOAD if response.status in (429, 503) else OK if response.ok else NEUTRAL
        if response.status == 429 or response.status >= 500:
            raise TransientFailure(f"HTTP {response.status}: {response.text(200)}", _retry_after(response))
        if response.status >= 400:
            self._refuse(module, response)
        return self._decode(module, response)

    def _refuse(self, module: ModuleType, response: Reply) -> None:
        hint = (
            "check CREDENCE_LLM__API_KEY"
            if response.status in (401, 403)
            else "check CREDENCE_LLM__BASE_URL (with /v1), that CREDENCE_LLM__MODEL is a served model name, "
            "and that the server supports response_format json_schema"
        )
        raise LLMError(
            f"LLM server refused task {module.NAME}: HTTP {response.status} from "
            f"{response.url}: {response.text(300)}; {hint}"
        )

    def _decode(self, module: ModuleType, response: Reply) -> Any:
        try:
            data = orjson.loads(response.body)
            usage = data.get("usage") or {}
            self._stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self._stats.completion_tokens += int(usage.get("completion_tokens") or 0)
            _count(0, int(usage.get("prompt_tokens") or 0))
            _count(1, int(usage.get("completion_tokens") or 0))
            content = message_content(data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise TransientFailure(f"malformed response envelope: {exc!r}") from exc
        try:
            return module.Output.model_validate_json(content or "")
        except ValidationError as exc:
            kind = "malformed JSON" if _not_json(content) else "schema-invalid output"
            raise TransientFailure(f"{kind} for {module.NAME}: {str(exc)[:300]}", content=True) from exc

    # -- the one call -------------------------------------------------------------------------

    async def call(self, prompt: ModuleType, call: Call) -> Any:
        if call.empty is not None:  # nothing for a model to judge: no request
            return call.empty
        return await self._call(prompt, call)


# The traced call's own counts (tokens in, out, retries), while tracing is on: the span reports them.
_CALL_USAGE: ContextVar[list[int] | None] = ContextVar("credence_llm_call_usage", default=None)


def _count(which: int, n: int) -> None:
    usage = _CALL_USAGE.get()
    if usage is not None:
        usage[which] += n


def _not_json(content: str | None) -> bool:
    try:
        json.loads(content or "")
    except ValueError:
        return True
    return False


__all__ = ["OpenAIBackend", "response_format"]
