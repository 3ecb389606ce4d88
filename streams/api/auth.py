"""Who is calling: the bearer key names one tenant; a path's tenant must be that tenant.

`authenticate(request, tenant)` is the one check every tenant route, the memory browser and the
/metrics policy use. A key that is missing or unknown is 401; a valid key on another tenant's path is
404, the same answer an unknown tenant gets, so a key never learns whether another tenant exists.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from credence.config.api import ApiSettings
from credence.errors import ApiError
from credence.streams.api.tenants import Tenant

NOT_FOUND = "not found"


@dataclass
class TokenBucket:
    """`rate` requests per second, at most `burst` at once. `now` is a monotonic clock reading."""

    rate: float
    burst: int
    tokens: float = field(default=-1.0)
    at: float = 0.0

    def take(self, now: float) -> float:
        """0 when a request may go now, else the seconds until one may."""
        if self.tokens < 0:
            self.tokens, self.at = float(self.burst), now
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimits:
    """One bucket per tenant in this worker; a tenant's new limits take effect on its next request."""

    def __init__(self, defaults: ApiSettings, clock=time.monotonic) -> None:
        self.defaults = defaults
        self.clock = clock
        self._buckets: dict[str, TokenBucket] = {}

    def check(self, tenant: Tenant) -> None:
        rate = tenant.settings.requests_per_second or self.defaults.requests_per_second
        burst = tenant.settings.burst or self.defaults.burst
        bucket = self._buckets.get(tenant.name)
        if bucket is None or (bucket.rate, bucket.burst) != (rate, burst):
            bucket = self._buckets[tenant.name] = TokenBucket(rate, burst)
        wait = bucket.take(self.clock())
        if wait > 0:
            raise ApiError(429, f"tenant {tenant.name} is over its rate of {rate:g} requests/s; retry later",
                           {"Retry-After": str(max(1, math.ceil(wait)))})


def bearer_key(headers) -> str:
    value = headers.get("Authorization", "")
    scheme, _, key = value.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>' (see `credence tenants add`)",
                       {"WWW-Authenticate": 'Bearer realm="credence"'})
    return key.strip()


def authenticate(request, tenant: str | None = None, *, directory, limits: RateLimits | None = None) -> Tenant:
    """The tenant whose key the request carries; with `tenant`, also that it is the path's tenant.
    Raises ApiError 401 (no or unknown key), 404 (another tenant's path), 429 (over the rate).
    In a worker, call `Api.authenticate(request, tenant)` (server.py), which supplies the directory and limits."""
    caller = directory.tenant_for_key(bearer_key(request.headers))
    if caller is None:
        raise ApiError(401, "unknown API key", {"WWW-Authenticate": 'Bearer realm="credence", error="invalid_token"'})
    if tenant is not None and tenant != caller.name:
        raise ApiError(404, NOT_FOUND)
    if limits is not None:
        limits.check(caller)
    return caller
