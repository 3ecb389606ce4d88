"""HTTP API defaults: what a tenant gets unless its own record overrides it (`credence tenants add --…`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ApiSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Per tenant and per worker: a token bucket refilled at this rate, holding at most `burst` requests.
    requests_per_second: float = Field(default=50.0, gt=0)
    burst: int = Field(default=100, ge=1)
    # Largest request body accepted (bytes); a bigger one is refused with 413 before it is read whole.
    max_body_bytes: int = Field(default=1_000_000, ge=1024)
    # Most turns one POST …/turns may carry (Kafka producers are the high-volume path).
    max_turns_per_request: int = Field(default=1000, ge=1)
    # How long `POST …/feedback?wait=true` waits for the stream to apply the feedback.
    feedback_wait_seconds: float = Field(default=10.0, gt=0, le=120)
    # A read forwarded to the scope's owner gives up after this long (503 then).
    forward_timeout_seconds: float = Field(default=10.0, gt=0)
    # How long a starting worker waits to read the tenants and cards topics before it answers anyway.
    directory_catchup_seconds: float = Field(default=30.0, gt=0)
