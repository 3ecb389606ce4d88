"""LLM backend settings: which backend, the OpenAI-compatible server, concurrency, timeouts, retries.

Environment: CREDENCE_LLM__BACKEND=openai, CREDENCE_LLM__BASE_URL=http://vllm:8000/v1,
CREDENCE_LLM__MODEL=<served model name>, … (nested under the one Settings object).
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class LLMSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    # "rules" keeps the whole pipeline offline and deterministic; it is the embedded default.
    backend: Literal["rules", "openai"] = "rules"

    # OpenAI-compatible server (production: vLLM). base_url includes the /v1 suffix, as OpenAI clients do.
    base_url: str = "http://localhost:8000/v1"
    api_key: SecretStr | None = None
    # The served model name (vLLM --served-model-name); required when backend is "openai".
    model: str = ""
    # Model tiers: prompt name -> served model for that prompt's calls (the rest use `model`), e.g.
    # CREDENCE_LLM__MODELS='{"surfaced_feedback": "small", "negative_keyword_target": "small"}' routes the
    # frequent cheap checks to a small model. Prompt names (streams/llm/prompts/): stage1_extraction,
    # stage2_classification, candidate_rerank, surfaced_feedback, negative_keyword_target, reflection_synthesis,
    # merge_decision, recent_summary (the recent memo: the origin runs it on its "summary" tier).
    models: dict[str, str] = Field(default_factory=dict)

    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    # Requests in flight at the server per worker: adaptive (AIMD, streams/llm/concurrency.py), starting
    # at initial_concurrency, halved on 429/503/timeouts, grown by one per window of answers while latency
    # holds, always within [min_concurrency, max_concurrency]. max_concurrency also sizes the one HTTP
    # connection pool (all kept alive) and the runner's own bound.
    max_concurrency: int = Field(default=256, ge=1)
    initial_concurrency: int = Field(default=64, ge=1)
    min_concurrency: int = Field(default=1, ge=1)
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)
    # A backend that runs in the worker's process (rules) answers each request inside the batch, right
    # after the record that asked (no round trip through the result topics). False sends its requests
    # through the runner and the result topics, as a remote model's are.
    inline_in_process: bool = True
    # The Stage-2 token caps are the seed's numbers and live in MemorySettings (stage2_*).
