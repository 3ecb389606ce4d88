"""Bi-temporal validity: supersede, never overwrite; "what was valid at T".

Every version of an entry is a journal snapshot. ``valid_from`` says when the version's meaning (its
text) became valid, ``invalidated_at`` when a new meaning replaced it. A change of meaning — a merge
that rewrites the text, a supersede — writes two versions: the old meaning closed (``invalidated_at`` =
now) and the new one (``valid_from`` = now). Live reads see only ``invalidated_at`` IS NULL; the state
never holds an invalidated version, the journal keeps them all. Pure: time is a parameter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

from credence.tables.clock import as_utc
from credence.tables.entries import ARCHIVED, Entry


def is_live(entry: Entry) -> bool:
    return entry.invalidated_at is None


def means_differently(before: Entry, after: Entry) -> bool:
    """Whether ``after`` changes the meaning of ``before`` (its text), rather than its evidence or status."""
    return before.id == after.id and before.text != after.text


def supersede(before: Entry, after: Entry, now: datetime) -> tuple[Entry, Entry]:
    """(the old meaning closed at ``now``, the new meaning valid from ``now``), as the next two versions of
    ``before``: nothing about the old meaning is overwritten."""
    now = as_utc(now)
    closed = replace(before, invalidated_at=now, version=before.version + 1, updated_at=now)
    return closed, replace(after, valid_from=now, invalidated_at=None, version=before.version + 2, updated_at=now)


def recorded_at(entry: Entry) -> datetime:
    return entry.updated_at or entry.created_at


def valid_at(entry: Entry, at: datetime) -> bool:
    """Whether this version's meaning held at ``at`` (and the entry was in the active view then)."""
    at = as_utc(at)
    if entry.valid_from is not None and entry.valid_from > at:
        return False
    if entry.invalidated_at is not None and entry.invalidated_at <= at:
        return False
    return not (entry.status == ARCHIVED and (entry.archived_at is None or entry.archived_at <= at))


def as_of(versions: Iterable[Entry], at: datetime) -> dict[str, Entry]:
    """What was valid at ``at``: per entry id, the newest version recorded at or before ``at``, when its
    meaning held then. Versions may come in any order, duplicated (at-least-once journal) or mixed ids."""
    at = as_utc(at)
    newest: dict[str, Entry] = {}
    for version in versions:
        if recorded_at(version) > at:
            continue
        held = newest.get(version.id)
        if held is None or version.version > held.version:
            newest[version.id] = version
    return {entry_id: e for entry_id, e in sorted(newest.items()) if valid_at(e, at)}
