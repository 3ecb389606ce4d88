"""Tenant records on the tenants topic, keys and their hashes, the directory every worker keeps."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.errors import RecordError
from credence.records.topics import TOPICS
from credence.streams.api.directory import Directory
from credence.streams.api.tenants import Tenant, TenantSettings, decode_tenant, hash_key, key_matches, new_key

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_keys_are_256_bit_random_and_stored_only_as_hashes():
    keys = {new_key() for _ in range(100)}
    assert len(keys) == 100
    for key in keys:
        assert key.startswith("cred_") and len(key) >= 5 + 43  # 32 bytes in url-safe base64
        record = Tenant("acme", hash_key(key), NOW).encode()
        assert key.encode() not in record and key_matches(key, json.loads(record)["key_hash"])
    assert not key_matches(new_key(), hash_key(new_key()))


@given(budget=st.none() | st.integers(0, 10_000), powerful=st.none() | st.booleans(),
       rate=st.none() | st.floats(0.01, 1000), zone=st.sampled_from([None, "UTC", "Europe/Berlin"]))
def test_tenant_record_round_trips(budget, powerful, rate, zone):
    tenant = Tenant("acme", hash_key("k"), NOW, TenantSettings(
        persona_token_budget=budget, powerful_memory=powerful, requests_per_second=rate, time_zone=zone))
    assert decode_tenant(b"acme", tenant.encode()) == tenant


@pytest.mark.parametrize("record, reason", [
    (b"{", "not valid JSON"), (b"[]", "v1 JSON object"), (b'{"v": 2}', "v1 JSON object"),
    (b'{"tenant": "a/b", "key_hash": "x"}', "tenant"),
    (b'{"tenant": "acme", "key_hash": "md5:abc", "created_at": "2026-01-01T00:00:00Z"}', "key_hash"),
    (json.dumps({"tenant": "acme", "key_hash": hash_key("k"), "created_at": "2026-01-01T00:00:00Z",
                 "settings": {"time_zone": "Mars/Olympus"}}).encode(), "time zone"),
    (json.dumps({"tenant": "acme", "key_hash": hash_key("k"), "created_at": "2026-01-01T00:00:00Z",
                 "settings": {"burst": 0}}).encode(), "burst"),
    (json.dumps({"tenant": "acme", "key_hash": hash_key("k"), "created_at": "noon"}).encode(), "created_at"),
])
def test_bad_tenant_records_are_refused_with_the_reason(record, reason):
    with pytest.raises(RecordError, match=reason):
        decode_tenant(b"acme", record)


def test_a_record_keyed_for_another_tenant_is_refused():
    with pytest.raises(RecordError, match="keyed"):
        decode_tenant(b"globex", Tenant("acme", hash_key("k"), NOW).encode())


def test_directory_keeps_the_latest_record_per_tenant():
    d = Directory()
    d.apply(TOPICS.tenants, b"acme", Tenant("acme", hash_key("old"), NOW).encode())
    d.apply(TOPICS.tenants, b"globex", Tenant("globex", hash_key("g"), NOW).encode())
    d.apply(TOPICS.tenants, b"acme", Tenant("acme", hash_key("new"), NOW).encode())  # rotate-key
    assert d.tenant_for_key("old") is None and d.tenant_for_key("new").name == "acme"
    d.apply(TOPICS.tenants, b"acme", b"{broken")  # ignored, the good state stays
    assert d.rejected == 1 and d.tenant_for_key("new").name == "acme"
    d.apply(TOPICS.tenants, b"acme", None)  # remove: a tombstone
    assert d.tenant_for_key("new") is None and "acme" not in d.tenants
    assert d.tenant_for_key("g").name == "globex"


def test_directory_keeps_the_streams_book_of_tenant_settings():
    """The stream reads each tenant's settings from the book the directory fills (runtime/tenancy.py), never
    from the API: the latest record's, gone with a tombstone, unchanged by a broken record; ready with it."""
    d = Directory()
    d.apply(TOPICS.tenants, b"acme", Tenant("acme", hash_key("k"), NOW, TenantSettings(powerful_memory=False)).encode())
    d.apply(TOPICS.tenants, b"acme", Tenant("acme", hash_key("k"), NOW, TenantSettings(time_zone="Asia/Tokyo")).encode())
    d.apply(TOPICS.tenants, b"acme", b"{broken")
    assert d.book.tenant_settings("acme") == TenantSettings(time_zone="Asia/Tokyo")
    assert d.book.tenant_settings("acme") is d.tenants["acme"].settings  # one copy: the runtime caches on it
    d.apply(TOPICS.tenants, b"acme", None)
    assert d.book.tenant_settings("acme") is None and d.tenant_settings("acme") is None
    d.ready.set()
    assert d.book.ready.is_set()
