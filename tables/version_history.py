"""An entry's version history: the texts a rewrite replaced, newest last, bounded.

A rewrite (a correction's merge or keep_new, a user's edit of the text) keeps the entry's id and its
counters and only changes the text; what the text said before is kept here, with when, why and on which
fact's word it was replaced, so a corrected entry still shows what it used to say. The origin keeps the
same four fields and the last five items (its correction apply, ``PERSONA_VERSION_HISTORY_MAX``); it drops the
old text on keep_new, which we never do. Pure: time is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from credence.errors import DomainError
from credence.tables.clock import as_utc, format_instant, parse_instant

# Why a text was replaced. Readers show the reason as is; new reasons may be added, never renamed.
CORRECTION_MERGE = "correction_merge"
CORRECTION_KEEP_NEW = "correction_keep_new"
PROMOTION_MERGE = "promotion_merge"
USER_EDIT = "user_edit"


@dataclass(frozen=True, slots=True)
class Version:
    """One replaced text: ``text`` held until ``replaced_at``, replaced for ``reason`` on the word of the
    fact ``source_fact_id`` (None when no fact said it, e.g. an operator's or user's edit)."""

    text: str
    replaced_at: datetime
    reason: str
    source_fact_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise DomainError(f"version text must be a string, got {type(self.text).__name__}")
        if not isinstance(self.replaced_at, datetime):
            raise DomainError(f"version replaced_at must be an instant, got {self.replaced_at!r}")
        if not isinstance(self.reason, str) or not self.reason:
            raise DomainError(f"version reason must be a non-empty string, got {self.reason!r}")
        if self.source_fact_id is not None and not isinstance(self.source_fact_id, str):
            raise DomainError(f"version source_fact_id must be a string or null, got {self.source_fact_id!r}")
        object.__setattr__(self, "replaced_at", as_utc(self.replaced_at))

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "replaced_at": format_instant(self.replaced_at), "reason": self.reason,
                "source_fact_id": self.source_fact_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Version:
        if not isinstance(d, Mapping):
            raise DomainError(f"a version_history item must be a JSON object, got {type(d).__name__}")
        replaced_at = parse_instant(d.get("replaced_at"))
        if replaced_at is None:
            raise DomainError(f"version replaced_at {d.get('replaced_at')!r} is not an ISO-8601 timestamp")
        return cls(text=d.get("text"), replaced_at=replaced_at, reason=d.get("reason"),
                   source_fact_id=d.get("source_fact_id"))


def read_history(items: Iterable[Any] | None) -> tuple[Version, ...]:
    """A snapshot's version_history; absent (written before it existed) or null reads as empty."""
    if items is None:
        return ()
    if isinstance(items, str | bytes | Mapping):
        raise DomainError(f"version_history must be a list, got {type(items).__name__}")
    return tuple(item if isinstance(item, Version) else Version.from_dict(item) for item in items)


def appended(history: tuple[Version, ...], version: Version, limit: int) -> tuple[Version, ...]:
    """``history`` with ``version`` added last, keeping the newest ``limit`` items."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise DomainError(f"version history limit must be an int >= 1, got {limit!r}")
    return (*history, version)[-limit:]
