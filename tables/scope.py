"""Scope = tenant/user/character: the key of every topic and the boundary evidence never crosses."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from credence.errors import DomainError

SEPARATOR = "/"
MAX_PART = 200  # a tenant, user or character id longer than this is a client bug, not a name
# Control, format (zero-width, bidi overrides), surrogate and line/paragraph separator characters: an id
# holding one looks like another id on screen, or breaks a key, a path or a log line.
_UNPRINTABLE = ("Cc", "Cf", "Cs", "Zl", "Zp")


def _unprintable(value: str) -> bool:
    # str.isprintable() is False for every Other and Separator character but the ASCII space, so a printable
    # id holds none of these; only the rest needs the per-character look-up.
    return not value.isprintable() and any(unicodedata.category(c) in _UNPRINTABLE for c in value)


def check_part(name: str, value: object) -> str:
    """The one rule for a scope part, shared by the topic decoders, the domain and the Parquet paths:
    a non-empty id without '/', control characters or edge spaces, not a dot path, at most 200 chars."""
    if not isinstance(value, str) or not value.strip():
        raise DomainError(f"scope {name} must be a non-empty string, got {value!r}")
    if (SEPARATOR in value or value in (".", "..") or value != value.strip() or len(value) > MAX_PART
            or _unprintable(value)):
        raise DomainError(f"scope {name} must be at most {MAX_PART} characters, without '/', control "
                          f"characters or edge spaces, and not a dot path (got {value[:40]!r})")
    return value


def user_prefix(tenant: str, user: str) -> str:
    """The key prefix shared by every scope of one user: the key of a forget, which spans them all."""
    return f"{tenant}{SEPARATOR}{user}{SEPARATOR}"


def scope_key(tenant: str, user: str, character: str) -> str:
    """The topic key of a scope whose parts were checked already (``Scope(...).key`` checks them): its
    user's prefix and the character, so a forget's prefix selects exactly its user's scopes."""
    return user_prefix(tenant, user) + character


def selection_parts(selection: object) -> tuple[str, ...]:
    """A selection of scopes, "tenant", "tenant/user" or "tenant/user/character", as its checked parts
    (`credence export`); DomainError when it is none of them."""
    parts = selection.split(SEPARATOR) if isinstance(selection, str) else []
    if not 1 <= len(parts) <= 3:
        raise DomainError(f"select a tenant, a user or a scope: T, T/U or T/U/C (got {selection!r})")
    for name, value in zip(("tenant", "user", "character"), parts, strict=False):
        check_part(name, value)
    return tuple(parts)


def tenant_of(key: str) -> str:
    """The tenant of a scope key or of a user prefix."""
    return key.split(SEPARATOR, 1)[0]


def user_prefix_of(key: str) -> str:
    """The user prefix ``tenant/user/`` of a scope key (a user prefix is its own)."""
    return key[:key.rindex(SEPARATOR) + 1]


@dataclass(frozen=True, slots=True)
class Scope:
    tenant: str
    user: str
    character: str

    def __post_init__(self) -> None:
        check_part("tenant", self.tenant)
        check_part("user", self.user)
        check_part("character", self.character)

    @property
    def key(self) -> str:
        return scope_key(self.tenant, self.user, self.character)

    @classmethod
    def parse(cls, key: str) -> Scope:
        """The scope of a topic key "tenant/user/character"; DomainError when it is not one."""
        if not isinstance(key, str):
            raise DomainError(f"scope key must be a string 'tenant/user/character', got {key!r}")
        parts = key.split(SEPARATOR)
        if len(parts) != 3:
            raise DomainError(f"scope key {key!r} must have exactly three parts: 'tenant/user/character'")
        return cls(*parts)

    def fields(self) -> dict[str, str]:
        """The scope as the ``tenant``, ``user`` and ``character`` fields every scoped record carries."""
        return {"tenant": self.tenant, "user": self.user, "character": self.character}

    def __str__(self) -> str:
        return self.key
