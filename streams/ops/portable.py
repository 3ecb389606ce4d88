"""The portable export format (docs/export.md): JSON lines, a header first, then the switch, the cards and
the entries, in a fixed order so the same memory always writes the same bytes.

Pure: building the lines and reading them back with every line checked. `credence export` and `credence
import` (streams/ops/porting.py) do the I/O; `credence import --from-neko` (streams/ops/neko.py) builds
the same lines from an N.E.K.O. installation, so both imports take one path.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from credence.errors import CredenceError, DomainError, RecordError
from credence.streams.api.cards import Card, check_card_entries
from credence.tables.clock import format_instant, parse_instant
from credence.tables.entries import Entry
from credence.tables.scope import Scope, check_part, selection_parts

FORMAT: Final = "credence-export"
FORMAT_VERSION: Final = 1
HEADER, SWITCH, CARD, ENTRY = "header", "switch", "card", "entry"
TYPES: Final = (SWITCH, CARD, ENTRY)


class ExportFormatError(CredenceError):
    """A file that is not a credence export this version reads (its header or its first line)."""


def dumps(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def header(selection: str, exported_at: datetime, source: str) -> dict:
    return {"type": HEADER, "format": FORMAT, "format_version": FORMAT_VERSION, "selection": selection,
            "exported_at": format_instant(exported_at), "source": source}


def switch_line(tenant: str, enabled: bool) -> dict:
    return {"type": SWITCH, "tenant": tenant, "powerful_memory_enabled": enabled}


def card_line(card: Card) -> dict:
    return {"type": CARD, "card": card.to_dict()}


def entry_line(entry: Entry) -> dict:
    # The snapshot whole (Entry.to_dict): a field the entry gains (tags, version history) is carried as is.
    return {"type": ENTRY, "scope": entry.scope, "entry": entry.to_dict()}


def lines(head: dict, switches: dict[str, bool], cards: Iterable[Card], entries: Iterable[Entry]) -> list[str]:
    """The file's lines: header, switches by tenant, cards by (tenant, character), entries by (scope, id)."""
    out = [dumps(head)]
    out += [dumps(switch_line(t, switches[t])) for t in sorted(switches)]
    out += [dumps(card_line(c)) for c in sorted(cards, key=lambda c: (c.tenant, c.character))]
    out += [dumps(entry_line(e)) for e in sorted(entries, key=lambda e: (e.scope, e.id))]
    return out


def selected(selection: str, scope: Scope) -> bool:
    """Whether ``scope`` is in ``selection`` ("tenant", "tenant/user" or "tenant/user/character")."""
    parts = selection_parts(selection)
    return (scope.tenant, scope.user, scope.character)[:len(parts)] == parts


def check_selection(selection: str) -> str:
    selection_parts(selection)
    return selection


def import_id(scope: str, entries: list[dict]) -> str:
    """The identity of one scope's import: the same entries again are the same import (a no-op)."""
    body = json.dumps([scope, entries], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return "imp-" + hashlib.sha256(body.encode()).hexdigest()[:24]


def chunks(entries: list[dict], budget: int) -> list[list[dict]]:
    """One scope's snapshots in file order, cut into runs whose JSON stays within ``budget`` bytes (a snapshot
    larger than that alone in its run), so a big scope travels as several import records."""
    out: list[list[dict]] = [[]]
    used = 0
    for entry in entries:
        size = len(dumps(entry).encode()) + 1
        if out[-1] and used + size > budget:
            out.append([])
            used = 0
        out[-1].append(entry)
        used += size
    return [run for run in out if run]


@dataclass(frozen=True)
class Problem:
    line: int  # 1-based line number in the file
    scope: str | None  # the scope the line names, when it names one
    reason: str
    text: str  # the line as read (what is dead-lettered)


@dataclass
class Parsed:
    header: dict
    switches: dict[str, bool] = field(default_factory=dict)
    cards: list[Card] = field(default_factory=list)
    scopes: dict[str, list[dict]] = field(default_factory=dict)  # scope key -> entry snapshots, in file order
    problems: list[Problem] = field(default_factory=list)

    @property
    def bad_scopes(self) -> set[str]:
        """Scopes a bad line names: none of their lines is imported (never half a scope)."""
        return {p.scope for p in self.problems if p.scope is not None}

    def good_scopes(self) -> dict[str, list[dict]]:
        bad = self.bad_scopes
        return {k: v for k, v in self.scopes.items() if k not in bad}


def read_header(first: str) -> dict:
    try:
        head = json.loads(first)
    except json.JSONDecodeError as exc:
        raise ExportFormatError(f"line 1 is not JSON ({exc}): not a credence export") from None
    if not isinstance(head, dict) or head.get("type") != HEADER or head.get("format") != FORMAT:
        raise ExportFormatError(f"line 1 is not a {FORMAT} header: not a credence export")
    if head.get("format_version") != FORMAT_VERSION:
        raise ExportFormatError(f"{FORMAT} version {head.get('format_version')!r}: this credence reads version "
                                f"{FORMAT_VERSION}; export again with a matching credence")
    return head


def parse(text_lines: Iterable[str]) -> Parsed:
    """Every line read and checked; a bad line is a Problem naming its scope when it names one."""
    it = iter(text_lines)
    first = next(it, None)
    if first is None:
        raise ExportFormatError("the file is empty: not a credence export")
    parsed = Parsed(read_header(first))
    seen: dict[str, set[str]] = {}
    for number, raw in enumerate(it, start=2):
        if not raw.strip():
            continue
        try:
            _line(parsed, json.loads(raw), seen)
        except (json.JSONDecodeError, RecursionError) as exc:
            parsed.problems.append(Problem(number, None, f"not JSON: {exc}", raw))
        except (DomainError, RecordError) as exc:
            parsed.problems.append(Problem(number, _scope_named(raw), str(exc), raw))
    return parsed


def _scope_named(raw: str) -> str | None:
    try:
        obj = json.loads(raw)
        return Scope.parse(obj["scope"]).key
    except (ValueError, KeyError, TypeError, DomainError):
        return None


def _line(parsed: Parsed, obj: Any, seen: dict[str, set[str]]) -> None:
    if not isinstance(obj, dict) or obj.get("type") not in TYPES:
        raise RecordError(f"a line must be an object whose 'type' is one of {TYPES}")
    if obj["type"] == SWITCH:
        check_part("tenant", obj.get("tenant"))
        if not isinstance(obj.get("powerful_memory_enabled"), bool):
            raise RecordError("a switch line's 'powerful_memory_enabled' must be true or false")
        parsed.switches[obj["tenant"]] = obj["powerful_memory_enabled"]
    elif obj["type"] == CARD:
        parsed.cards.append(_card(obj.get("card")))
    else:
        scope = Scope.parse(obj.get("scope")).key
        entry = Entry.from_dict(obj.get("entry"))
        if entry.scope != scope:
            raise DomainError(f"entry {entry.id} belongs to {entry.scope}, not to the line's scope {scope}")
        ids = seen.setdefault(scope, set())
        if entry.id in ids:
            raise DomainError(f"entry id {entry.id!r} appears twice in {scope}")
        ids.add(entry.id)
        parsed.scopes.setdefault(scope, []).append(obj["entry"])


def _card(card: Any) -> Card:
    if not isinstance(card, dict):
        raise RecordError("a card line's 'card' must be an object")
    updated_at = parse_instant(card.get("updated_at"))
    if updated_at is None:
        raise RecordError("a card's 'updated_at' must be an ISO-8601 timestamp")
    return Card(tenant=check_part("tenant", card.get("tenant")), character=check_part("character",
                card.get("character")), entries=check_card_entries(card.get("entries")), updated_at=updated_at)
