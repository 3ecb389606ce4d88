"""One N.E.K.O. character's reflections and persona entries as credence entries (streams/ops/neko.py
composes them). Each row's counters are carried verbatim: the seven evidence fields defaulted exactly as the
origin's normalize_reflection / _normalize_entry do (0.0, 0.0, null, null, 0, null, 0), naive local times
read in the installation's zone. Active copies win over archive shards; an entry only in a shard is
archived."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from datetime import UTC, datetime, tzinfo
from functools import partial

from credence.errors import DomainError
from credence.streams.ops.neko_files import CharacterFiles
from credence.tables.clock import parse_day
from credence.tables.entries import (
    ACTIVE,
    ARCHIVED,
    CONFIRMED,
    DENIED,
    PENDING,
    PERSONA,
    PROMOTE_BLOCKED,
    PROMOTED,
    REFLECTION,
    Entry,
)
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

EVIDENCE_FIELDS = ("reinforcement", "disputation", "rein_last_signal_at", "disp_last_signal_at", "sub_zero_days",
                   "sub_zero_last_increment_date", "user_fact_reinforce_count")
STATUSES = {"pending": PENDING, "confirmed": CONFIRMED, "promoted": PROMOTED, "merged": PROMOTED,
            "denied": DENIED, "promote_blocked": PROMOTE_BLOCKED, "archived": ARCHIVED}
SECTIONS = {"master": "master", "neko": "neko", "relationship": "relationship", "user": "master", "ai": "neko"}
# The origin's one-shot evidence migration for counter-less reflections (evidence_loops.py:607-753).
MIGRATION_SEED = {"promoted": ("reinforcement", 2.0), "confirmed": ("reinforcement", 1.0),
                  "denied": ("disputation", 2.0)}


def instant(value: object, zone: tzinfo) -> datetime | None:
    """A naive local ISO time in ``zone`` (or an aware one) in UTC; None for missing or unreadable, which the
    origin's decay also reads as "no timestamp"."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=zone)).astimezone(UTC)


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return 0.0
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if math.isfinite(number) else 0.0


def section_rows(section: object) -> list[dict]:
    """A persona section's entries: {"facts": [...]}, the legacy inner list "dynamics", or a bare list;
    plain-string entries (the oldest shape) as {"text": ...}."""
    if isinstance(section, dict):
        rows = section.get("facts", section.get("dynamics", []))
    else:
        rows = section
    if not isinstance(rows, list):
        return []
    return [{"text": r} if isinstance(r, str) else r for r in rows if isinstance(r, str | dict)]


def is_card(row: dict) -> bool:
    return row.get("protected") is True or row.get("source") == "character_card" or str(
        row.get("id", "")).startswith("card_")


def protected_rows(persona: dict) -> list[dict]:
    return [r for key, section in persona.items() if key in SECTIONS for r in section_rows(section) if is_card(r)]


class Rows:
    """The builders of one character's entries, in the order they are yielded (reflections, then persona)."""

    def __init__(self, files: CharacterFiles, zone: tzinfo, now: datetime, migrated: bool, notes: list[str]):
        self.files, self.zone, self.now, self.migrated, self.notes = files, zone, now, migrated, notes
        self.counts: dict[str, int] = {}
        self.importance: dict[str, int] = {}
        for fact in files.facts:  # facts.json first: the active copy wins over the archive's
            self.importance.setdefault(str(fact.get("id")), _importance(fact.get("importance")))
        self.promoted_at: dict[str, datetime] = {}

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def at(self, value: object) -> datetime | None:
        return instant(value, self.zone)

    def evidence(self, row: dict, status: str | None = None) -> Evidence:
        if not self.migrated and not any(f in row for f in EVIDENCE_FIELDS):
            seed = MIGRATION_SEED.get(status or "")
            if seed is None:
                return Evidence()
            self.count("counter-less reflections seeded as the origin's evidence migration does (clock: the import)")
            clock = "rein_last_signal_at" if seed[0] == "reinforcement" else "disp_last_signal_at"
            return Evidence(**{seed[0]: seed[1], clock: self.now})
        return Evidence(
            reinforcement=_number(row.get("reinforcement")),
            disputation=max(0.0, _number(row.get("disputation"))),
            rein_last_signal_at=self.at(row.get("rein_last_signal_at")),
            disp_last_signal_at=self.at(row.get("disp_last_signal_at")),
            sub_zero_days=max(0, int(_number(row.get("sub_zero_days")))),
            sub_zero_last_increment_date=_day(row.get("sub_zero_last_increment_date")),
            user_fact_reinforce_count=max(0, int(_number(row.get("user_fact_reinforce_count")))))

    def history(self, row: dict) -> list[dict]:
        out = []
        for item in row.get("version_history") or ():
            replaced = self.at(item.get("replaced_at")) if isinstance(item, dict) else None
            if replaced is None or not isinstance(item.get("text"), str):
                self.count("version-history items without a text or a time skipped")
                continue
            out.append({"text": item["text"], "replaced_at": replaced.isoformat(),
                        "reason": str(item.get("reason") or "neko"), "source_fact_id": item.get("source_fact_id")})
        return out

    def _union(self, active: list[dict], shards: list[dict], what: str) -> Iterator[tuple[dict, bool]]:
        seen: set[str] = set()
        for row in active:
            if row.get("id") and row["id"] not in seen:
                seen.add(row["id"])
                yield row, False
        for row in shards:
            rid = row.get("id")
            if not rid:
                continue
            if rid in seen:
                self.count(f"{what} found in the view and in a shard: the view's copy kept")
                continue
            seen.add(rid)
            yield row, True

    def reflections(self) -> Iterator:
        for row, archived in self._union(self.files.reflections, self.files.reflection_shards, "reflections"):
            if row.get("status") in ("promoted", "merged"):
                promoted = self.at(row.get("promoted_at") or row.get("merged_at"))
                if promoted is not None:
                    self.promoted_at["prom_" + row["id"]] = promoted
            yield "reflection", row, partial(self.reflection, row, archived)

    def persona(self) -> Iterator:
        for key, section in sorted(self.files.persona.items()):
            if key == "__meta__":
                continue
            subject = key.removeprefix("@subject/") if key.startswith("@subject/") else None
            if key not in SECTIONS and subject is None:
                self.count(f"persona rows of the unknown section {key!r} skipped")
                continue
            triple = {f: section.get(f) for f in ("subject_kind", "subject_id", "scope")} if subject else {}
            entity = section.get("entity", "master") if subject else SECTIONS[key]
            for row in section_rows(section):
                if is_card(row):
                    continue  # the card is regenerated from characters.json (neko.card_entries)
                row = row if row.get("id") else {**row, "id": _legacy_id(key, row.get("text", ""))}
                yield "persona entry", {**triple, **row}, partial(self.persona_entry, row, entity, False)
        by_id = {r.get("id"): r for r in self.files.persona_shards}
        active = {r.get("id") for s in self.files.persona.values() for r in section_rows(s)}
        for rid, row in by_id.items():
            if rid and rid not in active and not is_card(row):
                yield "archived persona entry", row, partial(self.persona_entry, row, row.get("entity", "master"),
                                                                True)

    def reflection(self, row: dict, archived: bool, scope: Scope) -> Entry | None:
        raw = row.get("status") or "pending"
        if raw not in STATUSES:
            raise DomainError(f"unknown status {raw!r}")
        if archived and raw != "archived":
            self.count(f"{raw} reflections found only in a shard, imported as archived")
        status = ARCHIVED if archived else STATUSES[raw]
        created = self._created(row.get("created_at"))
        facts = [str(f) for f in row.get("source_fact_ids") or ()]
        known = [self.importance[f] for f in facts if f in self.importance]
        merged_into = row.get("absorbed_into") if raw == "merged" else ("prom_" + row["id"] if raw == "promoted"
                                                                       else None)
        self.count(f"reflections imported ({raw})")
        return Entry(
            id=str(row["id"]), kind=REFLECTION, **scope.fields(), text=_text(row), created_at=created,
            status=status, subject=SECTIONS.get(row.get("entity"), str(row.get("entity") or "")),
            importance=max(known) if known else 5, source_fact_ids=tuple(facts),
            evidence=self.evidence(row, raw), confirmed_at=self.at(row.get("confirmed_at")),
            promoted_at=self.at(row.get("promoted_at") or row.get("merged_at")), merged_into_id=merged_into,
            promote_attempts=max(0, int(_number(row.get("promote_attempt_count")))),
            last_promote_attempt_at=self.at(row.get("last_promote_attempt_at")), **self._common(row, status))

    def persona_entry(self, row: dict, entity: str, archived: bool, scope: Scope) -> Entry | None:
        status = ARCHIVED if archived else ACTIVE
        merged = [str(i) for i in row.get("merged_from_ids") or ()]
        if row.get("source") == "reflection" and row.get("source_id") and row["source_id"] not in merged:
            merged.insert(0, str(row["source_id"]))
        clocks = [c for c in (self.promoted_at.get(str(row["id"])), self.at(row.get("rein_last_signal_at")),
                              self.at(row.get("disp_last_signal_at")), self.at(row.get("restored_at"))) if c]
        if not clocks:
            self.count("persona entries without any time (the origin keeps no created_at): created at the import")
        self.count("persona entries imported" + (" (archived)" if archived else ""))
        return Entry(
            id=str(row["id"]), kind=PERSONA, **scope.fields(), text=_text(row), created_at=min(clocks or [self.now]),
            status=status, subject=entity, evidence=self.evidence(row), merged_from_ids=tuple(merged),
            **self._common(row, status))

    def _created(self, value: object) -> datetime:
        created = self.at(value)
        if created is None:
            self.count("reflections without a readable created_at: created at the import")
        return created or self.now

    def _common(self, row: dict, status: str) -> dict:
        archived_at = self.at(row.get("archived_at")) if status == ARCHIVED else None
        if status == ARCHIVED and archived_at is None:
            archived_at = self.now
            self.count("archived rows without archived_at: archived at the import")
        mentions = [m for m in (self.at(x) for x in row.get("recent_mentions") or ()) if m is not None]
        return {"recent_mentions": tuple(mentions), "archived_at": archived_at,
                "suppressed_at": self.at(row.get("suppressed_at")) if row.get("suppress") else None,
                "version_history": self.history(row)}


def _text(row: dict) -> str:
    text = row.get("text")
    if not isinstance(text, str) or not text.strip():
        raise DomainError("no text")
    return text


def _importance(value: object) -> int:
    number = int(_number(value)) if value is not None else 5
    return min(10, max(1, number))


def _day(value: object):
    try:
        return parse_day(value) if isinstance(value, str) else None
    except (ValueError, DomainError):
        return None


def _legacy_id(section: str, text: str) -> str:
    return "legacy_" + hashlib.sha256(f"{section}\x1f{text}".encode()).hexdigest()[:12]
