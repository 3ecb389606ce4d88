"""HTTP API defaults: what a tenant gets unless its own record overrides it (`credence tenants add --…`)."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import NoDecode


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
    # The longest `?wait=applied|extracted&timeout=` (POST …/turns, the turn status and the reads) may wait
    # for the scope's owner to reach a turn; a forwarded waiting read is given this long on top.
    turn_wait_max_seconds: float = Field(default=30.0, gt=0, le=300)
    # A read forwarded to the scope's owner gives up after this long (503 then).
    forward_timeout_seconds: float = Field(default=10.0, gt=0)
    # How long a starting worker waits to read the tenants and cards topics before it answers anyway.
    directory_catchup_seconds: float = Field(default=30.0, gt=0)

    # The port's door (streams/api/door.py). A request whose Host names none of these (plus the loopback
    # names and the worker's canonical URL host, always allowed) is refused with 421; "*" allows any Host
    # (behind a proxy that checks it). Comma-separated or a JSON list; a name with or without :port.
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    # Origins a browser page may call the port from (scheme://host[:port]) beside those on an allowed
    # host; a request carrying another Origin is refused with 403 (DNS rebinding, cross-site pages).
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = ()
    # The bearer key that reads every tenant's scope views (/scopes, /scope/…) and /status's scope names;
    # unset, no key does (a tenant key reads only its own tenant's scopes).
    operator_key: SecretStr | None = None
    # /metrics labels turns, signals and entries by tenant only when asked: tenant names are tenant data.
    metrics_tenant_labels: bool = False

    @field_validator("allowed_hosts", "allowed_origins", mode="before")
    @classmethod
    def _names(cls, value):
        if isinstance(value, str):
            value = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
        return tuple(str(name).strip().lower() for name in value if str(name).strip())
