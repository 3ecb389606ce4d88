"""Reflection and persona entries: the model, its wire form (docs/records.md) and versioned changes.

Every change goes through ``changed()``, which bumps ``version`` and ``updated_at``; the journal's
event_id is "<entry_id>@<version>" and the stream layer compares versions to refuse late results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.errors import DomainError
from credence.tables.clock import as_utc, format_instant, parse_instant
from credence.tables.consensus import Consensus
from credence.tables.evidence import Evidence, apply_signal, evidence_score, seeded_evidence
from credence.tables.scope import Scope
from credence.tables.usage import Usage
from credence.tables.version_history import Version, appended, read_history

REFLECTION: Final = "reflection"
PERSONA: Final = "persona"
KINDS: Final = (REFLECTION, PERSONA)

# Reflection statuses.
PENDING: Final = "pending"
CONFIRMED: Final = "confirmed"
PROMOTED: Final = "promoted"
DENIED: Final = "denied"
PROMOTE_BLOCKED: Final = "promote_blocked"
ARCHIVED: Final = "archived"
# Persona statuses.
ACTIVE: Final = "active"

STATUSES: Final = {
    REFLECTION: (PENDING, CONFIRMED, PROMOTED, DENIED, PROMOTE_BLOCKED, ARCHIVED),
    PERSONA: (ACTIVE, ARCHIVED),
}

# Key order of Entry.to_dict(), exactly as docs/records.md lists it.
ENTRY_KEYS: Final = (
    "id", "kind", "tenant", "user", "character", "text", "subject", "importance", "source_fact_ids",
    "protected", "status", "evidence", "created_at", "confirmed_at", "promoted_at", "merged_from_ids",
    "merged_into_id", "promote_attempts", "last_promote_attempt_at", "recent_mentions", "suppressed_at",
    "version", "updated_at", "archived_at", "promotion_rejected_at", "valid_from", "invalidated_at", "usage",
    "consensus", "version_history", "tags",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Entry:
    """A reflection (synthesized observation) or a persona entry of one scope."""

    id: str
    kind: str
    tenant: str
    user: str
    character: str
    text: str
    created_at: datetime
    status: str
    subject: str = ""
    importance: int = 5
    source_fact_ids: tuple[str, ...] = ()
    protected: bool = False
    evidence: Evidence = field(default_factory=Evidence)
    confirmed_at: datetime | None = None
    promoted_at: datetime | None = None
    merged_from_ids: tuple[str, ...] = ()
    merged_into_id: str | None = None
    promote_attempts: int = 0
    last_promote_attempt_at: datetime | None = None
    recent_mentions: tuple[datetime, ...] = ()
    suppressed_at: datetime | None = None
    version: int = 1
    updated_at: datetime | None = None
    archived_at: datetime | None = None
    # When merge-on-promote last answered "reject": final for the reflection as it was then, until a
    # newer positive signal (tables.lifecycle.promote_decision).
    promotion_rejected_at: datetime | None = None
    # Bi-temporal validity: when this meaning became valid, and when a new meaning replaced
    # it. Live entries have invalidated_at None; invalidated versions exist only in the journal.
    valid_from: datetime | None = None  # None = created_at
    invalidated_at: datetime | None = None
    usage: Usage = field(default_factory=Usage)  # recall-driven strength; never part of the score
    consensus: Consensus | None = None  # external corroboration; never part of the score
    # The texts a rewrite replaced, oldest first, at most memory.version_history_max (version_history.py).
    version_history: tuple[Version, ...] = ()
    tags: tuple[str, ...] = ()  # the tenant's tags of the turns it came from (tables/tags.py); never scored

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise DomainError(f"entry id must be a non-empty string, got {self.id!r}")
        if self.kind not in KINDS:
            raise DomainError(f"entry kind must be one of {KINDS}, got {self.kind!r}")
        if self.status not in STATUSES[self.kind]:
            raise DomainError(f"{self.kind} status must be one of {STATUSES[self.kind]}, got {self.status!r}")
        Scope(self.tenant, self.user, self.character)
        if isinstance(self.importance, bool) or not isinstance(self.importance, int) or not 1 <= self.importance <= 10:
            raise DomainError(f"entry importance must be an int 1..10, got {self.importance!r}")
        if not isinstance(self.version, int) or self.version < 1:
            raise DomainError(f"entry version must be an int >= 1, got {self.version!r}")
        # Normalise so entries built by hand and entries read from the wire compare equal.
        for name in ("created_at", "confirmed_at", "promoted_at", "last_promote_attempt_at",
                     "suppressed_at", "updated_at", "archived_at", "promotion_rejected_at", "valid_from",
                     "invalidated_at"):  # fmt: skip
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_utc(value))
        object.__setattr__(self, "source_fact_ids", tuple(self.source_fact_ids))
        object.__setattr__(self, "merged_from_ids", tuple(self.merged_from_ids))
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "recent_mentions", tuple(as_utc(m) for m in self.recent_mentions))
        object.__setattr__(self, "version_history", read_history(self.version_history))
        if self.valid_from is None:
            object.__setattr__(self, "valid_from", self.created_at)
        if not isinstance(self.usage, Usage):
            raise DomainError(f"entry usage must be a Usage, got {type(self.usage).__name__}")
        if self.consensus is not None and not isinstance(self.consensus, Consensus):
            raise DomainError(f"entry consensus must be a Consensus or None, got {type(self.consensus).__name__}")
        if self.usage.since is None:
            # An entry's usage counts from its creation: one nobody ever recalls still fades.
            object.__setattr__(self, "usage", replace(self.usage, since=self.created_at))

    @property
    def scope(self) -> str:
        """The topic key "tenant/user/character"."""
        return Scope(self.tenant, self.user, self.character).key

    def score(self, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> float:
        return evidence_score(self.evidence, now, self.protected, settings=settings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "tenant": self.tenant,
            "user": self.user,
            "character": self.character,
            "text": self.text,
            "subject": self.subject,
            "importance": self.importance,
            "source_fact_ids": list(self.source_fact_ids),
            "protected": self.protected,
            "status": self.status,
            "evidence": self.evidence.to_dict(),
            "created_at": format_instant(self.created_at),
            "confirmed_at": format_instant(self.confirmed_at),
            "promoted_at": format_instant(self.promoted_at),
            "merged_from_ids": list(self.merged_from_ids),
            "merged_into_id": self.merged_into_id,
            "promote_attempts": self.promote_attempts,
            "last_promote_attempt_at": format_instant(self.last_promote_attempt_at),
            "recent_mentions": [format_instant(m) for m in self.recent_mentions],
            "suppressed_at": format_instant(self.suppressed_at),
            "version": self.version,
            "updated_at": format_instant(self.updated_at),
            "archived_at": format_instant(self.archived_at),
            "promotion_rejected_at": format_instant(self.promotion_rejected_at),
            "valid_from": format_instant(self.valid_from),
            "invalidated_at": format_instant(self.invalidated_at),
            "usage": self.usage.to_dict(),
            "consensus": self.consensus.to_dict() if self.consensus is not None else None,
            "version_history": [v.to_dict() for v in self.version_history],
            "tags": list(self.tags),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Entry:
        """Read a snapshot; DomainError names the first field that is missing or invalid."""
        if not isinstance(d, Mapping):
            raise DomainError(f"entry snapshot must be a JSON object, got {type(d).__name__}")
        for key in ("id", "kind", "tenant", "user", "character", "text", "status", "created_at"):
            if d.get(key) is None:
                raise DomainError(f"entry snapshot is missing {key!r}")
        created_at = parse_instant(d["created_at"])
        if created_at is None:
            raise DomainError(f"entry snapshot created_at {d['created_at']!r} is not an ISO-8601 timestamp")
        mentions = (parse_instant(m) for m in d.get("recent_mentions") or ())
        return cls(
            id=str(d["id"]),
            kind=d["kind"],
            tenant=d["tenant"],
            user=d["user"],
            character=d["character"],
            text=str(d["text"]),
            subject=str(d.get("subject") or ""),
            importance=_int(d.get("importance", 5), "importance"),
            source_fact_ids=tuple(str(i) for i in d.get("source_fact_ids") or ()),
            protected=_flag(d.get("protected", False), "protected"),
            status=d["status"],
            evidence=Evidence.from_dict(d.get("evidence")),
            created_at=created_at,
            confirmed_at=parse_instant(d.get("confirmed_at")),
            promoted_at=parse_instant(d.get("promoted_at")),
            merged_from_ids=tuple(str(i) for i in d.get("merged_from_ids") or ()),
            merged_into_id=d.get("merged_into_id"),
            promote_attempts=_int(d.get("promote_attempts", 0), "promote_attempts"),
            last_promote_attempt_at=parse_instant(d.get("last_promote_attempt_at")),
            recent_mentions=tuple(m for m in mentions if m is not None),
            suppressed_at=parse_instant(d.get("suppressed_at")),
            version=_int(d.get("version", 1), "version"),
            updated_at=parse_instant(d.get("updated_at")),
            archived_at=parse_instant(d.get("archived_at")),
            promotion_rejected_at=parse_instant(d.get("promotion_rejected_at")),
            valid_from=parse_instant(d.get("valid_from")),
            invalidated_at=parse_instant(d.get("invalidated_at")),
            usage=Usage.from_dict(d.get("usage"), since=created_at),
            consensus=Consensus.from_dict(d.get("consensus")),
            version_history=read_history(d.get("version_history")),
            tags=tuple(str(t) for t in d.get("tags") or ()),
        )


def _int(value: Any, name: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise DomainError(f"entry field {name} must be an integer, got {value!r}")


def _flag(value: Any, name: str) -> bool:
    # bool("false") is True: a flag that protects an entry from archival must be a real boolean.
    if not isinstance(value, bool):
        raise DomainError(f"entry field {name} must be true or false, got {value!r}")
    return value


def changed(entry: Entry, now: datetime, **changes: Any) -> Entry:
    """``entry`` with ``changes`` applied, version + 1 and updated_at = now: the one way entries change."""
    return replace(entry, **changes, version=entry.version + 1, updated_at=as_utc(now))


def rewrite_text(
    entry: Entry, text: str, now: datetime, *, reason: str, source_fact_id: str | None = None,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
) -> Entry:
    """``entry`` saying ``text`` from ``now`` on: the same id and counters, the text it replaced appended to
    its bounded version history. The same text again returns ``entry`` itself (a replay changes nothing).
    A character-card entry is protected: nothing outside the card rewrites it."""
    if entry.protected:
        raise DomainError(f"{entry.id} is a protected character-card entry; only its card changes its text")
    if not isinstance(text, str) or not text.strip():
        raise DomainError(f"the new text of {entry.id} must be a non-empty string, got {text!r}")
    text = text.strip()
    if text == entry.text:
        return entry
    return kept_text(entry, changed(entry, now, text=text), now, reason=reason, source_fact_id=source_fact_id,
                     settings=settings)


def kept_text(
    before: Entry, after: Entry, now: datetime, *, reason: str, source_fact_id: str | None = None,
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
) -> Entry:
    """``after`` (a change of ``before``, or the entry replacing it) with ``before``'s text appended to
    ``before``'s version history, when the text differs: no rewrite loses what the entry said."""
    if after.text == before.text:
        return after
    replaced = Version(before.text, now, reason, source_fact_id)
    return replace(after, version_history=appended(before.version_history, replaced, settings.version_history_max))


def apply_snapshot(current: Entry | None, snapshot: Entry) -> Entry:
    """The entry after replaying a journal snapshot: the newer version wins, so a replay or duplicate is a no-op."""
    if current is None or snapshot.version > current.version:
        return snapshot
    return current


def new_reflection(
    id: str,
    scope: Scope,
    text: str,
    created_at: datetime,
    *,
    subject: str = "",
    importance: int = 5,
    source_fact_ids: Iterable[str] = (),
    source_fact_importances: Iterable[int] = (),
    settings: MemorySettings = DEFAULT_MEMORY_SETTINGS,
    tags: Iterable[str] = (),
) -> Entry:
    """A pending reflection, seeded by the highest source-fact importance."""
    return Entry(
        id=id,
        kind=REFLECTION,
        tenant=scope.tenant,
        user=scope.user,
        character=scope.character,
        text=text,
        subject=subject,
        importance=importance,
        source_fact_ids=tuple(source_fact_ids),
        status=PENDING,
        evidence=seeded_evidence(source_fact_importances, created_at, settings=settings),
        created_at=created_at,
        updated_at=created_at,
        tags=tuple(tags),
    )


def new_persona_entry(
    id: str,
    scope: Scope,
    text: str,
    created_at: datetime,
    *,
    subject: str = "",
    importance: int = 5,
    source_fact_ids: Iterable[str] = (),
    protected: bool = False,
    evidence: Evidence | None = None,
    merged_from_ids: Iterable[str] = (),
    tags: Iterable[str] = (),
) -> Entry:
    """An active persona entry; ``protected`` marks a character-card entry (score +inf, never archived)."""
    return Entry(
        id=id,
        kind=PERSONA,
        tenant=scope.tenant,
        user=scope.user,
        character=scope.character,
        text=text,
        subject=subject,
        importance=importance,
        source_fact_ids=tuple(source_fact_ids),
        protected=protected,
        status=ACTIVE,
        evidence=evidence or Evidence(),
        merged_from_ids=tuple(merged_from_ids),
        created_at=created_at,
        updated_at=created_at,
        tags=tuple(tags),
    )


def record_signal(
    entry: Entry, kind: str, at: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS
) -> Entry:
    """Apply one evidence signal to an entry. Protected entries keep no evidence, so they are returned as is."""
    if entry.protected:
        return entry
    return changed(entry, at, evidence=apply_signal(entry.evidence, kind, at, settings=settings))


def set_consensus(entry: Entry, consensus: Consensus, now: datetime) -> Entry:
    """Record an external consensus on an entry; the same consensus again returns ``entry`` itself.
    Character-card entries are protected: nothing outside the card changes them."""
    if entry.protected:
        raise DomainError(f"{entry.id} is a protected character-card entry; it takes no consensus score")
    if entry.consensus == consensus:
        return entry
    return changed(entry, now, consensus=consensus)
