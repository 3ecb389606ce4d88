"""`credence export` and `credence import` (with `--from-neko`): the command table; the work is in
streams/ops/porting.py (cluster I/O), streams/ops/portable.py (the format) and streams/ops/neko.py (the
origin system's folder). Imports are lazy like the other commands'."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from credence.errors import CredenceError
from credence.records.topics import TOPICS


def _settings():
    from credence.config import load_settings

    return load_settings()


def _at(args) -> datetime:
    from credence.records.envelope import parse_utc

    return parse_utc(args.at, "--at") if args.at else datetime.now(UTC)


def cmd_export(args) -> int:
    from credence import __version__
    from credence.streams.ops.portable import check_selection, header, lines
    from credence.streams.ops.porting import read_stored
    from credence.streams.ops.worker import bootstrap_for

    settings = _settings()
    selection = check_selection(args.selection)
    head = header(selection, _at(args), f"credence {__version__}")  # every argument checked before Kafka
    stored = asyncio.run(read_stored(bootstrap_for(settings), settings, selection))
    body = lines(head, stored.switches, stored.cards, stored.entries)
    Path(args.out).write_text("\n".join(body) + "\n", encoding="utf-8")
    scopes = len({e.scope for e in stored.entries})
    print(f"exported {len(stored.entries)} entries of {scopes} scopes, {len(stored.cards)} cards and the switch "
          f"of {selection} to {args.out} (read from the journal, the cards topic and the switch file)")
    for note in stored.left_out:
        print(f"left out {note}")
    return 0


def _parsed(args):
    from credence.streams.ops.portable import parse

    if args.from_neko:
        from credence.streams.ops.neko import from_neko

        if not args.tenant or not args.user:
            raise CredenceError("--from-neko needs --tenant T and --user U: an installation has one user and "
                                "names no id for them")
        text, notes = from_neko(Path(args.from_neko), args.tenant, args.user, args.timezone, _at(args))
        for note in notes:
            print(f"neko: {note}")
        if args.out:
            Path(args.out).write_text("\n".join(text) + "\n", encoding="utf-8")
            print(f"wrote the mapped memory to {args.out} (format credence-export)")
        return parse(text), f"neko:{args.from_neko}"
    if not args.file:
        raise CredenceError("name the export file to import (or --from-neko DIR)")
    with open(args.file, encoding="utf-8") as f:
        return parse(f.read().splitlines()), args.file


def cmd_import(args) -> int:
    import getpass

    from credence.streams.ops.porting import current_switches, report, send_import
    from credence.streams.ops.worker import bootstrap_for

    settings = _settings()
    parsed, source = _parsed(args)
    for line in report(parsed, current_switches(settings, parsed.switches)):
        print(line)
    if args.dry_run:
        print("dry run: nothing was sent")
        return 1 if parsed.problems else 0
    by = (args.by or getpass.getuser() or "operator").strip()
    sent = asyncio.run(send_import(bootstrap_for(settings), settings, parsed, by, _at(args), source))
    print(f"sent {sent.entries} entries of {sent.scopes} scopes to {settings.topic(TOPICS.control)} (each applied by "
          f"its scope's owner, in order, journalled as 'imported'), {sent.cards} cards to "
          f"{settings.topic(TOPICS.cards)}, {sent.dead_lettered} dead letters to {settings.topic(TOPICS.dlq)}")
    return 1 if sent.dead_lettered else 0


def add_porting_parsers(sub) -> None:
    p = sub.add_parser("export", help="write a tenant's, user's or scope's memory to a portable JSON-lines file",
                       description="Reads the journal (each entry's newest snapshot in the scope's current life), "
                                   "the cards topic and the switch file; no worker needs to run. Format: "
                                   "docs/export.md.")
    p.add_argument("selection", help="T, T/U or T/U/C")
    p.add_argument("--out", required=True, help="the file to write")
    p.add_argument("--at", help="the header's exported_at (ISO-8601 with offset; default now)")
    p.set_defaults(func=cmd_export)
    p = sub.add_parser("import", help="bring an export (or an N.E.K.O. memory folder) in through the log",
                       description="Checks every line first and prints a report; without --dry-run sends one "
                                   "import record per scope to the control topic, applied by the scope's owner "
                                   "(idempotent, journalled). A scope named by a bad line is left out whole and "
                                   "its lines dead-lettered with the reason.")
    p.add_argument("file", nargs="?", help="a file written by `credence export`")
    p.add_argument("--from-neko", metavar="DIR", help="an N.E.K.O. folder (its app dir, or its memory/ dir)")
    p.add_argument("--tenant", help="with --from-neko: the tenant to import into")
    p.add_argument("--user", help="with --from-neko: the installation's user (group-chat subjects become "
                                  "their own users)")
    p.add_argument("--timezone", help="with --from-neko: the zone N.E.K.O.'s naive local times were written in "
                                      "(default: this machine's)")
    p.add_argument("--out", help="with --from-neko: also write the mapped memory to this file")
    p.add_argument("--dry-run", action="store_true", help="only print the report; send nothing")
    p.add_argument("--by", help="who imports (default: the OS user)")
    p.add_argument("--at", help="the import instant (ISO-8601 with offset; default now)")
    p.set_defaults(func=cmd_import)
