"""Scope = tenant/user/character: the key of every topic and the boundary evidence never crosses."""

from __future__ import annotations

from dataclasses import dataclass

from credence.errors import DomainError

SEPARATOR = "/"


def _check_part(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise DomainError(f"scope {name} must be a non-empty string, got {value!r}")
    if SEPARATOR in value:
        raise DomainError(f"scope {name} {value!r} must not contain {SEPARATOR!r}")
    return value


@dataclass(frozen=True, slots=True)
class Scope:
    tenant: str
    user: str
    character: str

    def __post_init__(self) -> None:
        _check_part("tenant", self.tenant)
        _check_part("user", self.user)
        _check_part("character", self.character)

    @property
    def key(self) -> str:
        return SEPARATOR.join((self.tenant, self.user, self.character))

    @classmethod
    def parse(cls, key: str) -> Scope:
        """The scope of a topic key "tenant/user/character"; DomainError when it is not one."""
        if not isinstance(key, str):
            raise DomainError(f"scope key must be a string 'tenant/user/character', got {key!r}")
        parts = key.split(SEPARATOR)
        if len(parts) != 3:
            raise DomainError(f"scope key {key!r} must have exactly three parts: 'tenant/user/character'")
        return cls(*parts)

    def __str__(self) -> str:
        return self.key
