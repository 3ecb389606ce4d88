"""Bearer keys, tenant isolation and the per-tenant token bucket."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from credence.config.api import ApiSettings
from credence.errors import ApiError
from credence.records.topics import TOPICS
from credence.streams.api.auth import RateLimits, TokenBucket, authenticate, bearer_key
from credence.streams.api.directory import Directory
from credence.streams.api.tenants import Tenant, TenantSettings, hash_key

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Request:
    def __init__(self, headers: dict) -> None:
        self.headers = headers


def directory_with(**keys: str) -> Directory:
    d = Directory()
    for name, key in keys.items():
        d.apply(TOPICS.tenants, name.encode(), Tenant(name, hash_key(key), NOW).encode())
    return d


def test_missing_or_malformed_authorization_is_401():
    for headers in ({}, {"Authorization": ""}, {"Authorization": "Bearer "}, {"Authorization": "Basic abc"},
                    {"Authorization": "Token abc"}):
        with pytest.raises(ApiError) as err:
            bearer_key(headers)
        assert err.value.status == 401 and "WWW-Authenticate" in err.value.headers
    assert bearer_key({"Authorization": "bearer  k1 "}) == "k1"


def test_a_key_opens_its_own_tenant_only_and_another_tenant_gets_404():
    d = directory_with(acme="key-a", globex="key-g")
    assert authenticate(Request({"Authorization": "Bearer key-a"}), "acme", directory=d).name == "acme"
    assert authenticate(Request({"Authorization": "Bearer key-a"}), None, directory=d).name == "acme"
    for tenant in ("globex", "nobody"):  # same answer whether the other tenant exists or not
        with pytest.raises(ApiError) as err:
            authenticate(Request({"Authorization": "Bearer key-a"}), tenant, directory=d)
        assert (err.value.status, err.value.reason) == (404, "not found")
    with pytest.raises(ApiError) as err:
        authenticate(Request({"Authorization": "Bearer key-x"}), "acme", directory=d)
    assert err.value.status == 401


def test_rate_limit_answers_429_with_retry_after_and_recovers():
    clock = [100.0]
    limits = RateLimits(ApiSettings(requests_per_second=0.5, burst=2), clock=lambda: clock[0])
    tenant = Tenant("acme", hash_key("k"), NOW)
    limits.check(tenant)
    limits.check(tenant)
    with pytest.raises(ApiError) as err:
        limits.check(tenant)
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "2"
    clock[0] += 2.0
    limits.check(tenant)
    faster = Tenant("acme", hash_key("k"), NOW, TenantSettings(requests_per_second=100, burst=50))
    for _ in range(50):  # the tenant's own override replaces the default bucket
        limits.check(faster)


@hsettings(max_examples=200, deadline=None)
@given(rate=st.floats(0.1, 100), burst=st.integers(1, 50),
       gaps=st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=200))
def test_bucket_never_admits_more_than_burst_plus_rate_times_elapsed(rate, burst, gaps):
    bucket, now, admitted = TokenBucket(rate, burst), 0.0, 0
    for gap in gaps:
        now += gap
        wait = bucket.take(now)
        if wait == 0:
            admitted += 1
        else:
            assert wait > 0 and bucket.take(now + wait + 1e-9) == 0  # the advertised wait is enough
            admitted += 1
            now += wait + 1e-9
    assert admitted <= burst + rate * now + 1e-6
