"""`credence export` and `credence import`: a tenant's, user's or scope's memory out to the portable format
(streams/ops/portable.py, docs/export.md) and back in through the log.

Export reads what the cluster stores, without a running worker: the journal (credence.evidence, kept
forever; each entry's newest snapshot in the scope's current incarnation, read from the `scopes`
changelog as `credence memory dedupe` does, so a forgotten user's entries are never exported), the cards
topic and the switch file. Import sends one control record per scope (type "import"), applied by the
scope's owner in order with everything else on its partition (streams/scope/imports.py); cards go to the
cards topic as `PUT …/cards` sends them. A scope with a bad line is not sent: its lines go to credence.dlq
with the reason, and the scopes around it are imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from aiokafka import AIOKafkaProducer

from credence.config import Settings
from credence.kafka import client_options
from credence.records.control import import_record
from credence.records.dead_letter import dead_letter
from credence.records.topics import TOPICS
from credence.streams.api.cards import Card, card_key
from credence.streams.api.directory import Directory, follow
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.portable import Parsed, chunks, dumps, import_id, selected
from credence.streams.runtime.journal import entries_from_journal, journal_of, scope_incarnations
from credence.streams.runtime.switch import PowerSwitch
from credence.tables.entries import Entry
from credence.tables.scope import Scope, selection_parts


@dataclass
class Stored:
    """What an export found: entries of the selection, its cards and switches, and the scopes left out."""

    entries: list[Entry] = field(default_factory=list)
    cards: list[Card] = field(default_factory=list)
    switches: dict[str, bool] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)  # "scope: why"


async def read_stored(bootstrap: str, settings: Settings, selection: str) -> Stored:
    parts = selection_parts(selection)
    exact = Scope(*parts) if len(parts) == 3 else None
    events = await journal_of(bootstrap, settings, None, exact)
    by_scope: dict[Scope, list[dict]] = {}
    for e in events:
        scope = Scope(e["tenant"], e["user"], e["character"])
        if selected(selection, scope):
            by_scope.setdefault(scope, []).append(e)
    stored = Stored()
    incarnations = await scope_incarnations(bootstrap, settings, list(by_scope))
    for scope in sorted(by_scope, key=lambda s: s.key):
        incarnation = incarnations[scope]
        if incarnation is None:
            stored.left_out.append(f"{scope.key}: no state (its user was forgotten): not exported")
            continue
        stored.entries += entries_from_journal(by_scope[scope], incarnation)
    directory = Directory()
    await follow(directory, bootstrap, settings, until_caught_up=True)
    # The cards of the characters exported; a tenant's export takes all its cards, a scope's its character's.
    characters = {(s.tenant, s.character) for s in by_scope} | ({(parts[0], parts[2])} if exact else set())
    stored.cards = [c for c in directory.cards.values()
                    if (c.tenant, c.character) in characters or (len(parts) == 1 and c.tenant == parts[0])]
    switch = PowerSwitch(settings.core_config_path)
    stored.switches = {parts[0]: switch.enabled(parts[0])}
    return stored


@dataclass
class Sent:
    scopes: int = 0
    entries: int = 0
    cards: int = 0
    dead_lettered: int = 0


async def send_import(bootstrap: str, settings: Settings, parsed: Parsed, by: str, at: datetime,
                      source: str) -> Sent:
    """The import records of each good scope (one, or several for a big scope), the cards, and a dead letter
    per bad line; a scope holding an entry too large for one record is dead-lettered whole, with that reason."""
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all",
                                                 max_request_size=settings.kafka.max_record_bytes + 64 * 1024))
    await producer.start()
    sent = Sent()
    try:
        for problem in parsed.problems:
            await _dead_letter(producer, settings, source, problem.line, problem.reason, problem.text, at)
            sent.dead_lettered += 1
        for scope, entries in sorted(parsed.good_scopes().items()):
            bodies = _import_bodies(settings, scope, entries, by, at)
            if isinstance(bodies, str):
                await _dead_letter(producer, settings, source, 0, bodies, json.dumps({"scope": scope}), at)
                sent.dead_lettered += 1
                continue
            for body in bodies:
                await producer.send_and_wait(settings.topic(TOPICS.control), body, key=scope.encode())
            sent.scopes += 1
            sent.entries += len(entries)
        for card in parsed.cards:
            await producer.send_and_wait(settings.topic(TOPICS.cards), card.encode(),
                                         key=card_key(card.tenant, card.character).encode())
            sent.cards += 1
    finally:
        await producer.stop()
    return sent


def _import_bodies(settings: Settings, scope: str, entries: list[dict], by: str, at: datetime) -> list[bytes] | str:
    """The scope's import records, each at most half the record limit in entries (a record waiting in a busy
    scope's state must leave it room); the reason instead when one snapshot alone is over the limit."""
    limit = settings.kafka.max_record_bytes
    bodies = [dumps(import_record(scope, import_id(scope, run), run, by, at)).encode()
              for run in chunks(entries, limit // 2)]
    over = max(len(b) for b in bodies) + len(scope.encode())
    if over > limit:
        return (f"the import of {scope} holds a {over}-byte record, over the {limit}-byte record limit "
                "(CREDENCE_KAFKA__MAX_RECORD_BYTES): an entry too large to carry")
    return bodies


async def _dead_letter(producer, settings: Settings, source: str, line: int, reason: str, text: str,
                       at: datetime) -> None:
    await producer.send_and_wait(settings.topic(TOPICS.dlq), dead_letter(
        topic=f"import:{source}", partition=-1, offset=line, reason=reason, original=text.encode(), at=at))


def report(parsed: Parsed, current_switches: dict[str, bool]) -> list[str]:
    """What an import would do (and, once sent, did): per scope its entries by kind and status, the cards,
    the switch against the one in force, and every bad line with its reason."""
    out = [f"format {parsed.header['format']} v{parsed.header['format_version']}, selection "
           f"{parsed.header.get('selection')!r}, exported {parsed.header.get('exported_at')} from "
           f"{parsed.header.get('source')}"]
    bad = parsed.bad_scopes
    for scope, entries in sorted(parsed.scopes.items()):
        counts: dict[str, int] = {}
        for e in entries:
            key = f"{e['kind']} {e['status']}"
            counts[key] = counts.get(key, 0) + 1
        what = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        verdict = "NOT imported: a bad line names it (see below)" if scope in bad else "import"
        out.append(f"{scope}: {len(entries)} entries ({what}): {verdict}")
    out += [f"card {c.tenant}/{c.character}: {len(c.entries)} protected entries: import" for c in parsed.cards]
    for tenant, enabled in sorted(parsed.switches.items()):
        now = current_switches.get(tenant)
        note = ("as in force here" if now == enabled else
                f"in force here: {now}; the switch is the operator's file (core_config_path): set "
                f"tenants.{tenant}.powerful_memory_enabled there to carry it over")
        out.append(f"switch {tenant}: powerful_memory_enabled {enabled} ({note})")
    out += [f"line {p.line}: {p.reason}" + (f" (scope {p.scope} left out whole)" if p.scope else " (skipped)")
            for p in parsed.problems]
    return out


def current_switches(settings: Settings, tenants: Iterable[str]) -> dict[str, bool]:
    switch = PowerSwitch(settings.core_config_path)
    return {t: switch.enabled(t) for t in tenants}
