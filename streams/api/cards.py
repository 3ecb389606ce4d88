"""Character cards: a character's protected entries, one record per tenant/character on the compacted
`<prefix>.cards` topic. Every worker reads the whole topic, so the card renders for every user of that
character wherever their scope lives. Card entries are not in any scope's state, so no signal can reach
them; they are rendered outside the token budgets (tables/rendering.py renders protected entries so)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from credence.errors import DomainError, RecordError
from credence.records.envelope import decode, parse_utc
from credence.records.topics import TOPICS
from credence.records.turn import MAX_TEXT
from credence.tables.clock import format_instant
from credence.tables.entries import ACTIVE, PERSONA, Entry
from credence.tables.scope import Scope, check_part

MAX_CARD_ENTRIES = 200


def card_key(tenant: str, character: str) -> str:
    return f"{tenant}/{character}"


@dataclass(frozen=True)
class Card:
    tenant: str
    character: str
    entries: tuple[tuple[str, str], ...]  # (id, text), in the order given
    updated_at: datetime

    def to_dict(self) -> dict:
        return {"v": 1, "tenant": self.tenant, "character": self.character,
                "entries": [{"id": i, "text": t} for i, t in self.entries], "updated_at": format_instant(self.updated_at)}

    def encode(self) -> bytes:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()

    def scope_entries(self, scope: Scope) -> list[Entry]:
        """The card as protected persona entries of one user's scope (what the renderer takes)."""
        return [Entry(id=eid, kind=PERSONA, tenant=scope.tenant, user=scope.user, character=scope.character,
                      text=text, created_at=self.updated_at, status=ACTIVE, protected=True, importance=10)
                for eid, text in self.entries]


def check_card_entries(entries: object) -> tuple[tuple[str, str], ...]:
    """[{id, text}, …] with unique ids (the scope-part rule) and non-empty texts; RecordError otherwise."""
    if not isinstance(entries, list) or len(entries) > MAX_CARD_ENTRIES:
        raise RecordError(f"'entries' must be a list of at most {MAX_CARD_ENTRIES} {{id, text}} objects")
    out, seen = [], set()
    for i, item in enumerate(entries):
        if not isinstance(item, dict) or set(item) != {"id", "text"}:
            raise RecordError(f"entries[{i}] must be an object with exactly 'id' and 'text'")
        try:
            eid = check_part("card entry id", item["id"])
        except DomainError as exc:
            raise RecordError(f"entries[{i}]: {exc}") from None
        text = item["text"]
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise RecordError(f"entries[{i}].text must be a non-empty string of at most {MAX_TEXT} characters")
        if eid in seen:
            raise RecordError(f"entries[{i}].id {eid!r} appears twice")
        seen.add(eid)
        out.append((eid, text))
    return tuple(out)


def decode_card(raw: bytes | None) -> Card | None:
    if raw is None:
        return None
    obj = decode(raw, TOPICS.cards.record)
    return Card(tenant=obj["tenant"], character=obj["character"], entries=check_card_entries(obj["entries"]),
                updated_at=parse_utc(obj["updated_at"], "updated_at"))

