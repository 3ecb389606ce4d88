"""Per-tenant stream settings: a tenant's scopes are stepped with its record's overrides (config/tenants.py)
over the worker's core config, for the powerful-memory switch and the evidence settings (time zone,
budgets). The records come from the tenants topic, which the API's directory follows and keeps in a
`TenantBook` here; the runtime reads any `TenantRecords`. The composition root (streams/ops/worker.py) builds these before the agent, which
takes them in its constructor."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from credence.config.memory import MemorySettings
from credence.config.tenants import TenantSettings
from credence.streams.runtime.switch import PowerSwitch


@runtime_checkable
class TenantRecords(Protocol):
    """The tenants' settings as this worker knows them (streams/api/directory.py's Directory)."""

    ready: asyncio.Event  # set once the tenants topic was read up to where it ended at start

    def tenant_settings(self, tenant: str) -> TenantSettings | None: ...

    def watch(self, on_put: Callable[[str, TenantSettings | None], None]) -> None:
        """Call `on_put` with every tenant's settings now, and again as each record arrives."""


class TenantBook:
    """The tenants' settings kept where the stream reads them: whoever follows the tenants topic (the API's
    directory) puts each record's settings here, so stepping a scope never calls up into the API."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()  # the follower sets it once caught up
        self._settings: dict[str, TenantSettings] = {}
        self._watchers: list[Callable[[str, TenantSettings | None], None]] = []

    def put(self, tenant: str, settings: TenantSettings | None) -> None:
        """A tenant record's settings (None: the tenant is gone)."""
        if settings is None:
            self._settings.pop(tenant, None)
        else:
            self._settings[tenant] = settings
        for on_put in self._watchers:
            on_put(tenant, settings)

    def watch(self, on_put: Callable[[str, TenantSettings | None], None]) -> None:
        self._watchers.append(on_put)
        for tenant, settings in self._settings.items():
            on_put(tenant, settings)

    def tenant_settings(self, tenant: str) -> TenantSettings | None:
        return self._settings.get(tenant)


class NoTenants:
    """No tenant records (a runtime without the API): every tenant has the core config's settings."""

    def __init__(self) -> None:
        self.ready = asyncio.Event()
        self.ready.set()

    def tenant_settings(self, tenant: str) -> TenantSettings | None:
        return None

    def watch(self, on_put: Callable[[str, TenantSettings | None], None]) -> None:
        pass  # no records: nothing ever arrives


class Switch(Protocol):
    """Whether a tenant's scopes run powerful memory (the agent reads it once per tenant and batch)."""

    def enabled(self, tenant: str) -> bool: ...


class TenantSwitch:
    """The powerful-memory switch with the tenant record's override first, then the core config file."""

    def __init__(self, inner: PowerSwitch, records: TenantRecords) -> None:
        self.inner = inner
        self.records = records

    def enabled(self, tenant: str) -> bool:
        settings = self.records.tenant_settings(tenant)
        if settings is not None and settings.powerful_memory is not None:
            return settings.powerful_memory
        return self.inner.enabled(tenant)


class TenantMemory:
    """The evidence settings a tenant's scopes are stepped with: the tenant record's overrides (its time zone
    for the daily sweeps, its budgets) over the worker's, as the API's reads apply them. One copy per tenant
    record, made when the record arrives, so stepping a scope only looks it up."""

    def __init__(self, memory: MemorySettings, records: TenantRecords) -> None:
        self.memory = memory
        self._copies: dict[str, MemorySettings] = {}
        records.watch(self._put)

    def _put(self, tenant: str, settings: TenantSettings | None) -> None:
        if settings is None:
            self._copies.pop(tenant, None)
        else:
            self._copies[tenant] = settings.memory(self.memory, tenant)

    def __call__(self, tenant: str) -> MemorySettings:
        return self._copies.get(tenant, self.memory)
