"""`credence tenants …`: create, list, re-key and remove tenants on the compacted tenants topic."""

from __future__ import annotations

from datetime import UTC, datetime

from aiokafka import AIOKafkaProducer
from pydantic import ValidationError

from credence.config import Settings
from credence.errors import RecordError, TenantError
from credence.kafka import client_options
from credence.records.topics import TOPICS
from credence.streams.api.directory import Directory, follow
from credence.streams.api.tenants import Tenant, TenantSettings, check_tenant_name, hash_key, new_key
from credence.streams.ops.admin import ensure_topics


async def current(bootstrap: str, settings: Settings) -> Directory:
    """The tenants (and cards) as the topics hold them now."""
    await ensure_topics(bootstrap, settings)
    directory = Directory()
    await follow(directory, bootstrap, settings, until_caught_up=True)
    return directory


async def _write(bootstrap: str, settings: Settings, name: str, value: bytes | None) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic(TOPICS.tenants), value, key=name.encode())
    finally:
        await producer.stop()


def overrides(values: dict) -> TenantSettings:
    try:
        return TenantSettings.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise TenantError(f"invalid tenant settings: {exc}") from None


def _name(name: str) -> str:
    try:
        return check_tenant_name(name)
    except RecordError as exc:
        raise TenantError(str(exc)) from None


async def add(bootstrap: str, settings: Settings, name: str, tenant_settings: TenantSettings) -> str:
    """Create the tenant; returns its key (shown once, stored only as a hash)."""
    name = _name(name)
    directory = await current(bootstrap, settings)
    if name in directory.tenants:
        raise TenantError(f"tenant {name!r} exists; use `credence tenants rotate-key {name}` for a new key")
    key = new_key()
    tenant = Tenant(name=name, key_hash=hash_key(key), created_at=datetime.now(UTC), settings=tenant_settings)
    await _write(bootstrap, settings, name, tenant.encode())
    return key


async def configure(bootstrap: str, settings: Settings, name: str, changes: dict) -> Tenant:
    """Change some of the tenant's overrides (others kept)."""
    tenant = await _existing(bootstrap, settings, name)
    merged = overrides(tenant.settings.model_dump(exclude_none=True) | changes)
    updated = Tenant(name=tenant.name, key_hash=tenant.key_hash, created_at=tenant.created_at, settings=merged)
    await _write(bootstrap, settings, tenant.name, updated.encode())
    return updated


async def rotate_key(bootstrap: str, settings: Settings, name: str) -> str:
    tenant = await _existing(bootstrap, settings, name)
    key = new_key()
    updated = Tenant(name=tenant.name, key_hash=hash_key(key), created_at=tenant.created_at, settings=tenant.settings)
    await _write(bootstrap, settings, tenant.name, updated.encode())
    return key


async def remove(bootstrap: str, settings: Settings, name: str) -> None:
    tenant = await _existing(bootstrap, settings, name)
    await _write(bootstrap, settings, tenant.name, None)  # tombstone: compaction drops the record


async def _existing(bootstrap: str, settings: Settings, name: str) -> Tenant:
    name = _name(name)
    tenant = (await current(bootstrap, settings)).tenants.get(name)
    if tenant is None:
        raise TenantError(f"no tenant {name!r}; `credence tenants list` shows them")
    return tenant
