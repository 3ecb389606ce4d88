"""An N.E.K.O. installation's memory folder read from disk (the shapes N.E.K.O.'s own code
writes): every file that carries evidence, the modern per-character layout and the
legacy flat one, each read defensively. Nothing is mapped here (streams/ops/neko.py does that); what is
skipped, and why, is written down in ``notes``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHARD = re.compile(r"^\d{4}-\d{2}-\d{2}_[0-9a-f]{8}\.json$")
SENTINEL = ".migrated_from_flat"
# Flat legacy files memory/<type>_<name>.json, the longer prefixes first ("persona_corrections_" is not a
# persona file of a character called "corrections_…").
FLAT_TYPES = ("persona_corrections", "reflections_archive", "facts_archive", "reflections", "persona", "facts")


@dataclass
class CharacterFiles:
    name: str
    reflections: list[dict] = field(default_factory=list)  # reflections.json: every status
    reflection_shards: list[dict] = field(default_factory=list)  # shards, then the legacy flat archive
    persona: dict = field(default_factory=dict)
    persona_shards: list[dict] = field(default_factory=list)
    corrections: list[dict] = field(default_factory=list)
    facts: list[dict] = field(default_factory=list)  # facts.json first, then facts_archive.json
    events_behind: int = 0  # journal events after events_applied.json's mark: not yet in the views


@dataclass
class Installation:
    characters: dict[str, CharacterFiles] = field(default_factory=dict)
    master: dict = field(default_factory=dict)  # characters.json 主人: the user's profile
    cards: dict[str, dict] = field(default_factory=dict)  # characters.json 猫娘: name -> card fields
    has_characters_json: bool = False
    switch: bool | None = None  # core_config.json powerful_memory_enabled (None: absent)
    notes: list[str] = field(default_factory=list)


def nfc(name: str) -> str:
    return unicodedata.normalize("NFC", name)


def read_json(path: Path, notes: list[str], kind: type) -> Any:
    """The file's JSON of type ``kind``; None (and a note) when it is unreadable or of another shape."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        notes.append(f"skipped {path}: unreadable ({type(exc).__name__}: {str(exc)[:80]})")
        return None
    if not isinstance(value, kind):
        notes.append(f"skipped {path}: a JSON {type(value).__name__}, expected a {kind.__name__}")
        return None
    return value


def _objects(rows: list | None, path: Path, notes: list[str]) -> list[dict]:
    rows = rows or []
    kept = [r for r in rows if isinstance(r, dict)]
    if len(kept) < len(rows):
        notes.append(f"skipped {len(rows) - len(kept)} rows of {path} that are not objects")
    return kept


def read_shards(folder: Path, notes: list[str]) -> list[dict]:
    """Every entry of a shard directory in file-name order; empty and corrupt shards skipped (noted)."""
    if not folder.is_dir():
        return []
    out: list[dict] = []
    for path in sorted(folder.iterdir()):
        if not SHARD.match(path.name):
            continue  # temp files, the migration sentinel, anything else: N.E.K.O. ignores them too
        rows = read_json(path, notes, list)
        if rows == []:
            notes.append(f"skipped {path}: an empty shard")
        out += _objects(rows, path, notes)
    return out


def _events_behind(folder: Path, notes: list[str]) -> int:
    path = folder / "events.ndjson"
    if not path.is_file():
        return 0
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event_id"):
            ids.append(event["event_id"])
    mark = (read_json(folder / "events_applied.json", notes, dict) or {}).get("last_applied_event_id")
    return len(ids) - ids.index(mark) - 1 if mark in ids else len(ids)


def read_character(folder: Path, name: str, notes: list[str], flat: dict[str, Path]) -> CharacterFiles:
    """One character's files; a modern file missing falls back to its flat legacy twin."""
    def path(kind: str, modern: str) -> Path:
        p = folder / modern
        return p if p.is_file() or kind not in flat else flat[kind]

    files = CharacterFiles(name)
    files.reflections = _objects(read_json(path("reflections", "reflections.json"), notes, list),
                                 folder / "reflections.json", notes)
    files.reflection_shards = read_shards(folder / "reflection_archive", notes)
    legacy = path("reflections_archive", "reflections_archive.json")
    if legacy.is_file():
        if (folder / "reflection_archive" / SENTINEL).is_file():
            notes.append(f"skipped {legacy}: left over after its migration to shards (the sentinel exists)")
        else:
            files.reflection_shards += _objects(read_json(legacy, notes, list), legacy, notes)
    files.persona = read_json(path("persona", "persona.json"), notes, dict) or {}
    files.persona_shards = read_shards(folder / "persona_archive", notes)
    files.corrections = _objects(read_json(path("persona_corrections", "persona_corrections.json"), notes, list),
                                 folder / "persona_corrections.json", notes)
    for kind, modern in (("facts", "facts.json"), ("facts_archive", "facts_archive.json")):
        files.facts += _objects(read_json(path(kind, modern), notes, list), folder / modern, notes)
    files.events_behind = _events_behind(folder, notes)
    if (folder / "settings.json").is_file() and not files.persona:
        notes.append(f"skipped {folder / 'settings.json'}: the pre-persona memory, which N.E.K.O. migrates into "
                     "persona.json at its start; start and stop it once, then import again")
    return files


def _flat_files(memory: Path) -> dict[str, dict[str, Path]]:
    """Legacy flat files by character name, then by type."""
    out: dict[str, dict[str, Path]] = {}
    for p in sorted(memory.glob("*.json")) if memory.is_dir() else []:
        for kind in FLAT_TYPES:
            if p.stem.startswith(kind + "_"):
                out.setdefault(nfc(p.stem[len(kind) + 1:]), {})[kind] = p
                break
    return out


def locate(root: Path) -> tuple[Path, Path]:
    """(memory dir, config dir) of an installation given as its app dir or as its memory/ dir."""
    if (root / "memory").is_dir():
        return root / "memory", root / "config"
    return root, root.parent / "config"


def read_installation(root: Path) -> Installation:
    memory, config = locate(root)
    inst = Installation()
    if not memory.is_dir():
        inst.notes.append(f"no memory folder at {memory}: nothing to import")
        return inst
    chars = read_json(config / "characters.json", inst.notes, dict)
    if chars is not None:
        inst.has_characters_json = True
        inst.master = chars.get("主人") if isinstance(chars.get("主人"), dict) else {}
        cats = chars.get("猫娘") if isinstance(chars.get("猫娘"), dict) else {}
        inst.cards = {nfc(k): v for k, v in cats.items() if isinstance(v, dict)}
    core = read_json(config / "core_config.json", inst.notes, dict) or {}
    if isinstance(core.get("powerful_memory_enabled"), bool):
        inst.switch = core["powerful_memory_enabled"]
    flat = _flat_files(memory)
    names = {nfc(p.name): p for p in memory.iterdir() if p.is_dir() and not p.name.startswith(".")}
    for name in sorted(set(names) | set(flat)):
        if inst.has_characters_json and name not in inst.cards:
            inst.notes.append(f"skipped character folder {name!r}: not in characters.json (a deleted or renamed "
                              "character)")
            continue
        inst.characters[name] = read_character(names.get(name, memory / name), name, inst.notes,
                                               flat.get(name, {}))
    return inst
