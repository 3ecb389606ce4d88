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

from pydantic import ValidationError

from credence.config.tenants import TenantSettings
from credence.errors import DomainError, RecordError
from credence.records.envelope import decode, parse_utc
from credence.records.topics import TOPICS
from credence.tables.clock import format_instant
from credence.tables.scope import check_part

KEY_PREFIX = "cred_"


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
    obj = decode(raw, TOPICS.tenants.record)
    name = obj["tenant"]
    if key is not None and key.decode("utf-8", "replace") != name:
        raise RecordError(f"tenant record for {name!r} is keyed {key!r}")
    key_hash = obj["key_hash"]
    if not key_hash.startswith("sha256:") or len(key_hash) != 71:
        raise RecordError("tenant record needs 'key_hash' = 'sha256:<64 hex>'")
    try:
        settings = TenantSettings.model_validate(obj.get("settings") or {})
    except (ValidationError, ValueError, TypeError, DomainError) as exc:
        raise RecordError(f"tenant record for {name!r} is invalid: {exc}") from None
    return Tenant(name=name, key_hash=key_hash, created_at=parse_utc(obj["created_at"], "created_at"),
                  settings=settings)
