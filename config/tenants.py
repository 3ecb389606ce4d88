"""A tenant's settings: its overrides of the worker's core config, carried on its record on the tenants
topic (streams/api/tenants.py). The API answers a tenant with them and the stream steps its scopes with
them (streams/runtime/tenancy.py); a field left None keeps the worker's value."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from credence.config.memory import MemorySettings, _zone


class TenantSettings(BaseModel):
    """A tenant's overrides of the service defaults; a field left None uses the default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    persona_token_budget: int | None = Field(default=None, ge=0)
    reflection_token_budget: int | None = Field(default=None, ge=0)
    powerful_memory: bool | None = None
    time_zone: str | None = None
    requests_per_second: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    max_body_bytes: int | None = Field(default=None, ge=1024)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            _zone(value)
        return value

    def memory_overrides(self) -> dict:
        """The MemorySettings fields this tenant overrides (budgets)."""
        return {k: v for k in ("persona_token_budget", "reflection_token_budget")
                if (v := getattr(self, k)) is not None}

    def memory(self, memory: MemorySettings, tenant: str) -> MemorySettings:
        """The evidence settings `tenant` is stepped and read with: `memory` with these overrides (budgets;
        the time zone of its daily sweeps)."""
        update = self.memory_overrides()
        if self.time_zone:
            update["tenant_time_zones"] = {**memory.tenant_time_zones, tenant: self.time_zone}
        return memory.model_copy(update=update) if update else memory
