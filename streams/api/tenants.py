"""Tenants: one record per tenant on the compacted `<prefix>.tenants` topic, keyed by the tenant's name.

A record holds only the hash of the tenant's key. Keys are 256-bit random tokens, so a plain SHA-256 is
enough (nothing to brute-force, unlike a password) and keeps checking a key cheap on every request.
Removing a tenant writes a tombstone (null value); compaction then drops the record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from credence.config.memory import _zone
from credence.errors import DomainError, RecordError
from credence.streams.runtime.records import parse_utc
from credence.tables.clock import format_instant
from credence.tables.scope import check_part

KEY_PREFIX = "cred_"


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


@dataclass(frozen=True)
class Tenant:
    name: str
    key_hash: str
    created_at: datetime
    settings: TenantSettings = field(default_factory=TenantSettings)

    def to_dict(self) -> dict:
        return {"v": 1, "tenant": self.name, "key_hash": self.key_hash, "created_at": format_instant(self.created_at),
                "settings": self.settings.model_dump(exclude_none=True)}

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    def public(self) -> dict:
        """What `tenants list` shows: never the hash."""
        return {"tenant": self.name, "created_at": format_instant(self.created_at),
                "settings": self.settings.model_dump(exclude_none=True)}


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)  # 32 random bytes = 256 bits


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def key_matches(key: str, key_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), key_hash)


def check_tenant_name(name: object) -> str:
    try:
        return check_part("tenant", name)
    except DomainError as exc:
        raise RecordError(str(exc)) from None


def decode_tenant(key: bytes | None, raw: bytes | None) -> Tenant | None:
    """A tenants-topic record; None for a tombstone. RecordError says what is wrong."""
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"tenant record is not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("v", 1) != 1:
        raise RecordError("tenant record must be a v1 JSON object")
    name = check_tenant_name(obj.get("tenant"))
    if key is not None and key.decode("utf-8", "replace") != name:
        raise RecordError(f"tenant record for {name!r} is keyed {key!r}")
    key_hash = obj.get("key_hash")
    if not isinstance(key_hash, str) or not key_hash.startswith("sha256:") or len(key_hash) != 71:
        raise RecordError("tenant record needs 'key_hash' = 'sha256:<64 hex>'")
    try:
        settings = TenantSettings.model_validate(obj.get("settings") or {})
    except (ValidationError, ValueError, TypeError, DomainError) as exc:
        raise RecordError(f"tenant record for {name!r} is invalid: {exc}") from None
    return Tenant(name=name, key_hash=key_hash, created_at=parse_utc(obj.get("created_at"), "created_at"),
                  settings=settings)
