"""`credence import --from-neko`: an N.E.K.O. installation mapped onto credence's entries with the counters
and clocks intact (the mapping in docs/export.md), written as the portable format's lines so
the import takes the same path as any export.

The mapping is pure (``map_installation``: the files as read, a zone, ``now``). Counters are carried
verbatim, so the evidence score at any instant is the origin's formula on the origin's values; naive local
times are read in the given zone.

The mapping, field by field: docs/export.md ("From N.E.K.O.").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from credence.errors import CredenceError, DomainError
from credence.streams.api.cards import Card
from credence.streams.ops import neko_entries
from credence.streams.ops.neko_files import CharacterFiles, Installation, read_installation
from credence.streams.ops.portable import header, lines
from credence.tables.entries import Entry
from credence.tables.scope import Scope

SOURCE = "neko"
MIGRATION_MARKER = "__evidence_migration_v1__"
# Card fields the origin never turns into protected entries (config/character_fields.py:21-59).
RESERVED_CARD_FIELDS = frozenset({"_reserved", "live2d", "voice_id", "system_prompt", "name", "tags", "描述",
                                  "model", "model_type", "vrm", "live2d_model", "animation", "workshop_id"})
SUBJECT_FIELDS = ("subject_kind", "subject_id", "scope")


@dataclass
class Mapped:
    entries: list[Entry] = field(default_factory=list)
    cards: list[Card] = field(default_factory=list)
    switch: bool = True
    notes: list[str] = field(default_factory=list)


def zone(name: str | None) -> tzinfo:
    if not name:
        return datetime.now().astimezone().tzinfo or UTC  # this machine's, as the checklist suggests
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CredenceError(f"unknown time zone {name!r}: give an IANA name such as Asia/Shanghai") from None


def subject_user(row: dict, notes: list[str], where: str) -> str | None:
    """The credence user a row belongs to: "" for the installation's user, `<kind>:<id>` for a group-chat
    subject, None (noted) for a row with part of the triple."""
    present = [row.get(f) for f in SUBJECT_FIELDS if row.get(f)]
    if not present:
        return ""
    if len(present) < len(SUBJECT_FIELDS):
        notes.append(f"skipped {where} {row.get('id')!r}: part of the subject triple only (corrupt to the origin "
                     "too, excluded from its reads)")
        return None
    return f"{row['subject_kind']}:{row['subject_id']}".replace("/", "%2F")


def card_entries(entity: str, fields: dict) -> list[tuple[str, str]]:
    """The origin's protected entries of one card (persona/persistence.py:384-455): one per field."""
    out = []
    for name, value in fields.items():
        if name in RESERVED_CARD_FIELDS or name.startswith("_") or value in (None, "", [], {}):
            continue
        if isinstance(value, list):
            value = "、".join(str(v) for v in value)
        elif isinstance(value, dict):
            continue  # nested settings, not a card field the origin renders
        eid = "card_" + hashlib.sha256(f"{entity}:{name}".encode()).hexdigest()[:8]
        out.append((eid, f"{name}: {value}"))
    return out


def _card(inst: Installation, files: CharacterFiles, tenant: str, now: datetime, notes: list[str]) -> Card | None:
    if inst.has_characters_json:
        pairs = card_entries("neko", inst.cards.get(files.name, {})) + card_entries("master", inst.master)
    else:
        pairs = [(e.get("id") or f"card_{i}", e.get("text", "")) for i, e in
                 enumerate(neko_entries.protected_rows(files.persona)) if e.get("text")]
        if pairs:
            notes.append(f"{files.name}: no characters.json; its card is taken from persona.json's protected entries")
    seen, unique = set(), []
    for eid, text in pairs:
        if eid not in seen:
            seen.add(eid)
            unique.append((eid, text))
    return Card(tenant, files.name, tuple(unique), now) if unique else None


def map_character(inst: Installation, files: CharacterFiles, tenant: str, user: str, at: tzinfo,
                  now: datetime, out: Mapped) -> None:
    notes = out.notes
    card = _card(inst, files, tenant, now, notes)
    if card is not None:
        out.cards.append(card)
    migrated = MIGRATION_MARKER in {e.get("id") for e in neko_entries.section_rows(files.persona.get("__meta__"))}
    rows = neko_entries.Rows(files, at, now, migrated, notes)
    for where, row, build in _rows(rows):
        subject = subject_user(row, notes, where)
        if subject is None:
            continue
        scope_user = subject or user
        try:
            entry = build(Scope(tenant, scope_user, files.name))
        except DomainError as exc:
            notes.append(f"skipped {where} {row.get('id')!r} of {files.name}: {exc}")
            continue
        if entry is not None:
            out.entries.append(entry)
    for what, n in rows.counts.items():
        notes.append(f"{files.name}: {n} {what}")
    _report_leftovers(files, notes)


def _rows(rows: neko_entries.Rows) -> Iterator:
    yield from rows.reflections()
    yield from rows.persona()


def _report_leftovers(files: CharacterFiles, notes: list[str]) -> None:
    if files.corrections:
        notes.append(f"{files.name}: skipped {len(files.corrections)} queued persona corrections "
                     "(persona_corrections.json): the queue is the origin's pending LLM work, not memory")
    if files.facts:
        open_facts = sum(1 for f in files.facts if not f.get("absorbed"))
        notes.append(f"{files.name}: skipped {len(files.facts)} facts (inputs; their evidence is in the "
                     f"reflections), {open_facts} of them not yet absorbed into a reflection")
    if files.events_behind:
        notes.append(f"{files.name}: WARNING {files.events_behind} journal events after events_applied.json's "
                     "mark are not in the views read here; start and stop N.E.K.O. once, then import again")


def map_installation(inst: Installation, tenant: str, user: str, at: tzinfo, now: datetime) -> Mapped:
    out = Mapped(notes=list(inst.notes))
    out.switch = True if inst.switch is None else inst.switch
    if inst.switch is None:
        out.notes.append("core_config.json has no powerful_memory_enabled: the origin's default (true)")
    for name in sorted(inst.characters):
        try:
            Scope(tenant, user, name)
        except DomainError as exc:
            out.notes.append(f"skipped character {name!r}: {exc}")
            continue
        map_character(inst, inst.characters[name], tenant, user, at, now, out)
    return out


def from_neko(root: Path, tenant: str, user: str, timezone: str | None, now: datetime) -> tuple[list[str], list[str]]:
    """The installation at ``root`` as the portable format's lines, and the notes on what was skipped."""
    Scope(tenant, user, "x")  # refuse a bad tenant or user before reading anything
    mapped = map_installation(read_installation(root), tenant, user, zone(timezone), now)
    head = header(tenant, now, SOURCE)  # the tenant: group-chat subjects are users of their own
    return lines(head, {tenant: mapped.switch}, mapped.cards, mapped.entries), mapped.notes
