"""`credence memory restore`, `credence memory consensus`, `credence memory dedupe` and `credence bridge
nominate`, and `credence memory delete`: deliberate human (or verification pipeline)
actions.

Kept out of cli.py so the main command table stays small; imports are lazy like the other commands'.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from credence.errors import CredenceError
from credence.records.topics import TOPICS


def _settings():
    from credence.config import load_settings

    return load_settings()


def _operator(args) -> str:
    import getpass

    by = (args.by or getpass.getuser() or "").strip()
    if not by:
        raise CredenceError("say who is acting: --by NAME")
    return by


def _scope_arg(args):
    from credence.tables.scope import Scope

    return Scope.parse(args.scope) if args.scope else None


def cmd_memory_restore(args) -> int:
    from credence.streams.ops.operator import send_restore
    from credence.streams.ops.worker import bootstrap_for
    from credence.streams.runtime.journal import journal_of, scope_of

    settings = _settings()
    scope = _scope_arg(args)
    by = _operator(args)
    bootstrap = bootstrap_for(settings)
    scope = scope or scope_of(asyncio.run(journal_of(bootstrap, settings, args.entry_id)), args.entry_id)
    asyncio.run(send_restore(bootstrap, settings, scope, args.entry_id, by, datetime.now(UTC)))
    print(f"asked the owner of {scope.key} to restore {args.entry_id} (applied in order; a soft-archived entry "
          "returns to the status it had, anything else is left as it is)")
    return 0


def cmd_memory_consensus(args) -> int:
    from credence.streams.ops.operator import send_consensus
    from credence.streams.ops.worker import bootstrap_for
    from credence.streams.runtime.journal import journal_of, scope_of
    from credence.tables.consensus import Consensus

    settings = _settings()
    scope = _scope_arg(args)
    by = _operator(args)
    at = datetime.now(UTC)
    Consensus(args.score, by, at)  # refuse a score outside 0..1 before touching the cluster
    bootstrap = bootstrap_for(settings)
    scope = scope or scope_of(asyncio.run(journal_of(bootstrap, settings, args.entry_id)), args.entry_id)
    asyncio.run(send_consensus(bootstrap, settings, scope, args.entry_id, args.score, by, at))
    print(f"asked the owner of {scope.key} to set the consensus of {args.entry_id} to {args.score} by {by} "
          f"(applied in order; at >= {settings.usage.consensus_skip_at} the usage-decay sweep skips it)")
    return 0


def _score(text: str) -> float:
    import argparse
    import math

    try:
        score = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise argparse.ArgumentTypeError(f"the score must be from 0 to 1, got {text}")
    return score


def cmd_memory_dedupe(args) -> int:
    from credence.streams.ops.operator import send_dedupe
    from credence.streams.ops.worker import bootstrap_for
    from credence.streams.runtime.journal import entries_from_journal, journal_of, scope_incarnation
    from credence.streams.scope.dedupe import duplicate_pairs
    from credence.tables.scope import Scope

    settings = _settings()
    scope = Scope.parse(args.scope)
    by = _operator(args) if args.apply else ""
    bootstrap = bootstrap_for(settings)
    now = datetime.now(UTC)
    incarnation = asyncio.run(scope_incarnation(bootstrap, settings, scope))
    events = asyncio.run(journal_of(bootstrap, settings, None, scope)) if incarnation is not None else []
    entries = entries_from_journal(events, incarnation)  # never a forgotten life's
    pairs = duplicate_pairs(entries, now, settings.memory)
    for keep, drop in pairs:
        print(f"{drop.id} ({drop.kind}, {drop.status}) {drop.text!r}\n  restates {keep.id} ({keep.kind}, "
              f"{keep.status}) {keep.text!r}")
    print(f"{len(pairs)} near-duplicate pair(s) among {len(entries)} stored entries of {scope.key}")
    if args.apply and pairs:
        asyncio.run(send_dedupe(bootstrap, settings, scope, by, now))
        print(f"asked the owner of {scope.key} to merge them (applied in order, on its state at that point; "
              "each merge and archive is journalled with cause dedupe:" + by + ")")
    return 0


def cmd_bridge_nominate(args) -> int:
    from credence.errors import BridgeError, BridgeRetired
    from credence.streams.ops.operator import send_candidate
    from credence.streams.ops.worker import bootstrap_for
    from credence.streams.runtime.journal import candidate_from_journal, journal_of, scope_incarnation, scope_of

    settings = _settings()
    if not settings.bridge.bridge_enabled:  # refuse before touching the cluster: nothing is read or emitted
        raise BridgeRetired("the bridge to verified facts is retired (bridge_enabled is false): nothing was "
                            "nominated; set CREDENCE_BRIDGE__BRIDGE_ENABLED=true to open it")
    by = _operator(args)
    bootstrap = bootstrap_for(settings)
    events = asyncio.run(journal_of(bootstrap, settings, args.entry_id, _scope_arg(args)))
    incarnation = asyncio.run(scope_incarnation(bootstrap, settings, scope_of(events, args.entry_id)))
    if incarnation is None:
        raise BridgeError(f"the scope of {args.entry_id!r} has no state (its user was forgotten): nothing to "
                          "nominate")
    candidate = candidate_from_journal(events, args.entry_id, datetime.now(UTC), by, settings, incarnation)
    asyncio.run(send_candidate(bootstrap, settings, candidate))
    print(f"nominated {candidate['candidate_id']} ({candidate['tenant']}/{candidate['user']}/"
          f"{candidate['character']}) to {settings.topic(TOPICS.fact_candidates)} with "
          f"{len(candidate['provenance']['versions'])} versions and {len(candidate['provenance']['signals'])} events")
    return 0


def cmd_memory_delete(args) -> int:
    from credence.client import Client
    from credence.streams.ops.mcp_stdio import read_key
    from credence.tables.scope import Scope

    scope = Scope.parse(args.scope)
    with Client(args.url, key=read_key(args.key_file), tenant=scope.tenant, timeout=120.0) as api:
        receipt = api.delete_entry(scope.user, scope.character, args.entry_id, by=_operator(args), reason=args.reason)
    print(receipt.model_dump_json(indent=2))
    left = [s.store for s in receipt.stores + receipt.kept if s.remaining != 0]
    return 0 if receipt.applied and not left else 1


def add_operator_parsers(sub) -> None:
    p = sub.add_parser("memory", help="operator actions on memory entries")
    msub = p.add_subparsers(dest="memory_command", required=True, metavar="SUBCOMMAND")
    r = msub.add_parser("restore", help="bring a soft-archived entry back into the active view",
                        description="Sends a restore control record to the scope's owner; the entry returns to "
                                    "the status it had before the usage-decay sweep soft-archived it.")
    r.add_argument("entry_id")
    r.add_argument("--scope", help="tenant/user/character (default: looked up in the journal)")
    r.add_argument("--by", help="who restores (default: the OS user)")
    r.set_defaults(func=cmd_memory_restore)
    c = msub.add_parser("consensus", help="set an entry's external consensus score (0..1)",
                        description="Sends a consensus control record to the scope's owner: the entry carries the "
                                    "score, who set it and when (journalled); at or above usage.consensus_skip_at "
                                    "(0.75) the usage-decay sweep skips it.")
    c.add_argument("entry_id")
    c.add_argument("score", type=_score, help="from 0 to 1")
    c.add_argument("--scope", help="tenant/user/character (default: looked up in the journal)")
    c.add_argument("--by", help="who sets it (default: the OS user)")
    c.set_defaults(func=cmd_memory_consensus)
    d = msub.add_parser("dedupe", help="report (and with --apply, merge) near-duplicate live entries of a scope",
                        description="Reads the scope's entries from the journal and lists each live entry that "
                                    "restates another (memory.restatement_* thresholds). With --apply, sends a "
                                    "dedupe control record: the scope's owner merges each duplicate into the "
                                    "entry it restates and archives it, journalled. Safe to run nightly.")
    d.add_argument("scope", help="tenant/user/character")
    mode = d.add_mutually_exclusive_group(required=True)
    mode.add_argument("--dry-run", action="store_true", help="only report the pairs")
    mode.add_argument("--apply", action="store_true", help="report, then ask the owner to merge them")
    d.add_argument("--by", help="who merges (default: the OS user)")
    d.set_defaults(func=cmd_memory_dedupe)
    e = msub.add_parser("delete", help="delete one entry everywhere, with an erasure receipt",
                        description="Asks a running worker (DELETE …/entries/{id}, as the tenant): the entry and "
                                    "the entries merged into it leave the tables, changelogs, recall index and "
                                    "Parquet archive, journalled as a deletion. Prints the erasure receipt; exit 1 "
                                    "when the owner did not apply it in time or a store still holds something.")
    e.add_argument("scope", help="tenant/user/character")
    e.add_argument("entry_id")
    e.add_argument("--url", required=True, help="a worker's web URL, e.g. http://127.0.0.1:6066")
    e.add_argument("--key-file", required=True, help="a file holding the tenant's API key")
    e.add_argument("--by", help="who deletes it (default: the OS user)")
    e.add_argument("--reason", help="why (journalled, at most 200 characters)")
    e.set_defaults(func=cmd_memory_delete)

    p = sub.add_parser("bridge", help="the gated, manual bridge from memory to verified facts")
    bsub = p.add_subparsers(dest="bridge_command", required=True, metavar="SUBCOMMAND")
    n = bsub.add_parser("nominate", help="nominate one ripe entry as a fact candidate (a human action)",
                        description="Refuses (exit 2) while CREDENCE_BRIDGE__BRIDGE_ENABLED is false. Reads the "
                                    "entry's history from the journal, checks it is ripe, and emits one candidate "
                                    "record with full provenance to <prefix>.fact-candidates.")
    n.add_argument("entry_id")
    n.add_argument("--scope", help="tenant/user/character (default: looked up in the journal)")
    n.add_argument("--by", help="who nominates (default: the OS user)")
    n.set_defaults(func=cmd_bridge_nominate)
