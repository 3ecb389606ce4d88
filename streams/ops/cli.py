"""The `credence` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path

from aiokafka.errors import KafkaError

from credence import __version__
from credence.errors import CredenceError
from credence.records.topics import TOPICS
from credence.streams.ops.operator_cli import add_operator_parsers
from credence.streams.ops.porting_cli import add_porting_parsers

log = logging.getLogger("credence")
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def _settings(args):
    from credence.config import load_settings

    return load_settings()


def cmd_broker(args) -> int:
    from credence.streams.ops.broker import EmbeddedBroker
    from credence.streams.ops.worker import embedded_broker_dir

    settings = _settings(args)
    data_dir = Path(args.data_dir) if args.data_dir else embedded_broker_dir(settings)
    broker = EmbeddedBroker(data_dir, settings.kafka_version, settings.broker_cache_dir,
                            port=args.port or settings.broker_port)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))  # before anyone learns we are up
    started = time.monotonic()
    broker.start()
    print(f"Kafka {settings.kafka_version} ready at {broker.bootstrap} in {time.monotonic() - started:.1f}s "
          f"(data {broker.data_dir}); Ctrl-C stops it", flush=True)
    print(f"export CREDENCE_KAFKA_BOOTSTRAP={broker.bootstrap}", flush=True)
    try:
        while not stop["now"] and broker.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    if broker.proc.returncode not in (0, 143, -15, None):
        print(f"broker exited with code {broker.proc.returncode}; see {broker.log_path}", file=sys.stderr)
        return 1
    return 0


def cmd_worker(args) -> int:
    from credence.streams.ops.worker import run_worker

    run_worker(_settings(args), loglevel=args.log_level)
    return 0


def cmd_replay(args) -> int:
    from credence import tracing
    from credence.streams.ops.replay import replay
    from credence.streams.ops.worker import bootstrap_for

    settings = _settings(args)
    bootstrap = args.bootstrap or bootstrap_for(settings)
    tracing.setup("credence-replay")  # off unless the OTEL_* variables ask for export
    written: dict[int, int] = {}
    sent = asyncio.run(replay(Path(args.file), bootstrap, settings, progress=not args.quiet, written=written))
    print(f"replayed {sent} records to {settings.topic(TOPICS.turns)} on {bootstrap}")
    if args.wait:
        from credence.streams.ops.replay import wait_replayed

        print(asyncio.run(wait_replayed(args, bootstrap, settings, written)))
    if args.flush:
        from credence.streams.ops.replay import flush_when_read, scopes_in

        flushed = asyncio.run(flush_when_read(bootstrap, settings, scopes_in(Path(args.file)), args.flush_timeout))
        print(f"flushed {flushed} scopes once the worker group {settings.app_id} had read them")
    return 0


def cmd_mcp(args) -> int:
    from credence.streams.ops.mcp_stdio import read_key, serve

    key = read_key(args.key_file)
    asyncio.run(serve(args.url, key))
    return 0


def cmd_demo(args) -> int:
    from credence.streams.ops.demo import default_input, run_demo

    path = Path(args.input) if args.input else default_input()
    return run_demo(_settings(args), path, timeout_s=args.timeout, serve=args.serve, port=args.port)


def cmd_sink(args) -> int:
    from credence.outage import exit_after, quiet_kafka_logs
    from credence.sinks.consumer import SinkRunner, run_sinks
    from credence.sinks.registry import build_sinks
    from credence.streams.ops.worker import bootstrap_for

    settings = _settings(args)
    sinks = build_sinks(settings)
    bootstrap, dlq = bootstrap_for(settings), settings.topic(TOPICS.dlq)
    if args.drain:
        for sink in sinks:
            stats = asyncio.run(SinkRunner(sink, bootstrap, dead_letter_topic=dlq, kafka=settings.kafka).drain())
            print(f"{sink!r}: {stats}")
        return 0
    quiet_kafka_logs(settings.kafka.outage_warning_interval_s)
    stop = asyncio.Event()

    def stopping() -> None:
        stop.set()
        exit_after(settings.worker_stop_grace_s, "the sink")

    async def main():
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping)
        return await run_sinks(sinks, bootstrap, stop, dead_letter_topic=dlq, kafka=settings.kafka)

    print(f"sinking {'; '.join(map(repr, sinks))}; Ctrl-C stops", flush=True)
    print(asyncio.run(main()))
    return 0


def cmd_archive_query(args) -> int:
    from credence.errors import ArchiveError
    from credence.sinks.analytics import query

    try:
        params = [json.loads(p) if args.json_params else p for p in args.param] or None
    except ValueError as exc:
        raise ArchiveError(f"a --param is not JSON ({exc}); quote strings as JSON ('\"acme\"') "
                           "or drop --json-params") from exc
    settings = _settings(args).archive
    print(query(args.root or settings.root, args.sql, params, args.format, settings))
    return 0


def cmd_archive_report(args) -> int:
    from credence.sinks.analytics import report

    settings = _settings(args).archive
    print(report(args.root or settings.root, args.png, tenant=args.tenant, settings=settings))
    if args.png:
        print(f"chart written to {args.png}")
    return 0


def cmd_forget(args) -> int:
    from credence.sinks.forget import forget_user
    from credence.streams.ops.replay import send_forget_at
    from credence.streams.ops.worker import bootstrap_for
    from credence.tables.scope import check_part

    check_part("tenant", args.tenant)  # the scope-part rule, before anything is sent or rewritten
    check_part("user", args.user)
    settings = _settings(args)
    cutoff = None  # --archive-only: the cut-off of an earlier forget, if any, else every row of the user
    if not args.archive_only:
        written = asyncio.run(send_forget_at(bootstrap_for(settings), settings, args.tenant, args.user))
        print(f"asked the owners of {len(written)} partitions to delete {args.tenant}/{args.user} from their tables")
        cutoff = {partition: offset + 1 for partition, offset in written.items()}  # the user's next incarnation
    report = forget_user(args.root or settings.archive.root, args.tenant, args.user, settings.archive, cutoff)
    print(f"archive: removed {report.rows_removed} rows of {args.tenant}/{args.user} "
          f"({report.shards_rewritten} shards rewritten, {report.shards_deleted} deleted)")
    return 0


OVERRIDES = (  # (flag, TenantSettings field, type, help)
    ("--persona-token-budget", "persona_token_budget", int, "prompt tokens for persona entries"),
    ("--reflection-token-budget", "reflection_token_budget", int, "prompt tokens for reflections"),
    ("--powerful-memory", "powerful_memory", lambda v: _on_off(v), "on or off"),
    ("--time-zone", "time_zone", str, "IANA zone whose days the archive sweep counts"),
    ("--requests-per-second", "requests_per_second", float, "API rate per worker"),
    ("--burst", "burst", int, "API requests allowed at once above the rate"),
    ("--max-body-bytes", "max_body_bytes", int, "largest API request body"),
)


def _on_off(value: str) -> bool:
    if value not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {value!r}")
    return value == "on"


def _overrides(args) -> dict:
    return {field: getattr(args, field) for _, field, _, _ in OVERRIDES if getattr(args, field) is not None}


def cmd_tenants(args) -> int:
    from credence.streams.ops import tenant_admin
    from credence.streams.ops.worker import bootstrap_for

    settings = _settings(args)
    bootstrap = bootstrap_for(settings)
    action = args.tenants_command
    if action == "add":
        key = asyncio.run(tenant_admin.add(bootstrap, settings, args.tenant, tenant_admin.overrides(_overrides(args))))
        print(f"tenant {args.tenant} created; its API key (shown once, stored only as a hash):")
        print(key)
    elif action == "rotate-key":
        key = asyncio.run(tenant_admin.rotate_key(bootstrap, settings, args.tenant))
        print(f"tenant {args.tenant} has a new API key; the old one no longer works:")
        print(key)
    elif action == "set":
        tenant = asyncio.run(tenant_admin.configure(bootstrap, settings, args.tenant, _overrides(args)))
        print(json.dumps(tenant.public()))
    elif action == "remove":
        asyncio.run(tenant_admin.remove(bootstrap, settings, args.tenant))
        print(f"tenant {args.tenant} removed; its key no longer works")
    else:
        directory = asyncio.run(tenant_admin.current(bootstrap, settings))
        for name in sorted(directory.tenants):
            print(json.dumps(directory.tenants[name].public()))
    return 0


def _tenants_parser(sub) -> None:
    p = sub.add_parser("tenants", help="API tenants: add, list, set, rotate-key, remove",
                       description="Tenants live on the compacted <prefix>.tenants topic that every worker reads; "
                                   "keys are shown once and stored only as SHA-256 hashes.")
    tsub = p.add_subparsers(dest="tenants_command", required=True, metavar="SUBCOMMAND")
    for action, text in (("add", "create a tenant; prints its key alone on the last line"),
                         ("set", "change a tenant's settings overrides")):
        a = tsub.add_parser(action, help=text)
        a.add_argument("tenant")
        for flag, field, kind, help_text in OVERRIDES:
            a.add_argument(flag, dest=field, type=kind, help=help_text)
    tsub.add_parser("list", help="tenants and their overrides (never keys)")
    for action, text in (("rotate-key", "replace the tenant's key; prints the new one on the last line"),
                         ("remove", "delete the tenant (its key stops working)")):
        tsub.add_parser(action, help=text).add_argument("tenant")
    p.set_defaults(func=cmd_tenants)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="credence",
        description="User-steered evidence memory for AI chat characters, on Kafka. Settings come from "
                    "CREDENCE_* environment variables (see docs/configuration.md).",
    )
    parser.add_argument("--version", action="version", version=f"credence {__version__}")
    parser.add_argument("--log-level", choices=LOG_LEVELS,
                        help="default INFO (WARNING for `mcp`, whose stderr a local MCP client shows)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    _runtime_parsers(sub)
    _data_parsers(sub)
    _tenants_parser(sub)
    add_operator_parsers(sub)
    add_porting_parsers(sub)
    return parser


def _runtime_parsers(sub) -> None:
    """The commands that run something: the broker, a worker, a replay, the demo."""
    p = sub.add_parser("broker", help="run the embedded single-node Kafka (KRaft) broker in the foreground",
                       description="Fetch Apache Kafka from Maven Central once (cached), format KRaft storage, "
                                   "run one broker+controller on 127.0.0.1 until Ctrl-C.")
    p.add_argument("--data-dir", help="broker data dir (default: $CREDENCE_DATA_DIR/broker)")
    p.add_argument("--port", type=int, default=0, help="listener port (default: a free one)")
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser("worker", help="run a stream worker (Faust) against CREDENCE_KAFKA_BOOTSTRAP or "
                                      "the embedded broker",
                       description="Runs the scope agent (turns, feedback, facts, control), its LLM runner, "
                                   "timers and web views (/status; /scopes and /scope/T/U/C with a key) until Ctrl-C. Kafka: "
                                   "CREDENCE_KAFKA_BOOTSTRAP, or the broker started by `credence broker`. LLM: "
                                   "CREDENCE_LLM__BACKEND=rules (offline fallback, default) or openai "
                                   "(CREDENCE_LLM__BASE_URL, CREDENCE_LLM__MODEL). Run several workers with the "
                                   "same CREDENCE_APP_ID to share the partitions.")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("replay", help="produce a JSON-lines file of turn records to credence.turns",
                       description="Each non-blank line is sent as one record keyed by its scope; invalid "
                                   "lines are sent too, so the worker dead-letters them with a reason.")
    p.add_argument("file", help="JSON-lines file of turn records (schema v1)")
    p.add_argument("--bootstrap", help="Kafka bootstrap servers (default: settings / embedded broker)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--flush", action="store_true",
                   help="end of input: once the worker group (CREDENCE_APP_ID) has read the turns, send each scope "
                        "of the file a flush (its open Stage-1 windows are extracted); how a historical replay ends")
    p.add_argument("--flush-timeout", type=float, default=600.0, metavar="S",
                   help="with --flush: seconds to wait for the worker to read the turns (default 600)")
    p.add_argument("--wait", choices=("applied", "extracted"),
                   help="return once the worker group applied every turn (extracted: and each scope's last turn "
                        "was extracted, asked through the API at --url with --key-file)")
    p.add_argument("--wait-timeout", type=float, default=600.0, metavar="S", help="with --wait (default 600)")
    p.add_argument("--url", default="http://127.0.0.1:6066", help="with --wait extracted: a worker's API")
    p.add_argument("--key-file", help="with --wait extracted: a file holding the tenant's API key")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("demo", help="the main job: broker + worker + replay of a sample, then a summary",
                       description="Starts the embedded broker (unless CREDENCE_KAFKA_BOOTSTRAP is set), a "
                                   "worker, replays the turns, waits until every turn is processed, prints a "
                                   "per-scope summary. Runs offline.")
    p.add_argument("--input", help="JSON-lines file of turns (default: the shipped sample)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for processing")
    p.add_argument("--serve", action="store_true", help="keep broker and worker running after the summary, "
                   "create the sample's tenants and print a key and a curl line for the HTTP API")
    p.add_argument("--port", type=int, default=0, help="with --serve: the API's port (default CREDENCE_WEB_PORT)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("mcp", help="a running worker's MCP tools over stdio, for local MCP clients",
                       description="Proxies MCP over stdin/stdout to the worker's POST /mcp (streamable HTTP), "
                                   "with the tenant key as the bearer: the same memory tools the worker serves.")
    p.add_argument("--url", required=True, help="the worker's web URL, e.g. http://127.0.0.1:6066")
    p.add_argument("--key-file", required=True, help="a file holding the tenant's API key (`credence tenants add`)")
    p.add_argument("--log-level", dest="command_log_level", choices=LOG_LEVELS,
                   help="what reaches stderr (default WARNING: a stdio MCP client shows every line of it)")
    p.set_defaults(func=cmd_mcp)


def _data_parsers(sub) -> None:
    """The commands over what the pipeline wrote: the Parquet sink, archive queries, forgetting a user."""
    from credence.sinks.registry import SINKS

    p = sub.add_parser("sink", help="run the configured sinks (default: the archive and evidence topics to Parquet)",
                       description="Runs the sinks CREDENCE_SINKS names (comma-separated; default archive,evidence; "
                                   f"known: {', '.join(SINKS)}). The archive and evidence sinks consume their topic "
                                   "and write hive-partitioned, size-bounded Parquet shards under "
                                   "CREDENCE_ARCHIVE__ROOT (a folder or s3://bucket/prefix). Every sink commits "
                                   "offsets only after what it wrote is durable.")
    p.add_argument("--drain", action="store_true", help="stop once caught up instead of running until Ctrl-C")
    p.set_defaults(func=cmd_sink)

    p = sub.add_parser("archive", help="query the Parquet archive with DuckDB")
    asub = p.add_subparsers(dest="archive_command", required=True, metavar="SUBCOMMAND")
    q = asub.add_parser("query", help="run SQL over the views `archive` and `evidence`",
                        description="Parameters are bound (use ? placeholders and --param), never formatted.")
    q.add_argument("sql")
    q.add_argument("--param", action="append", default=[], help="a bound parameter (repeatable, in order)")
    q.add_argument("--json-params", action="store_true", help="parse each --param as JSON (numbers, null)")
    q.add_argument("--format", default="table", choices=["table", "csv", "json"])
    q.add_argument("--root", help="archive root (default: CREDENCE_ARCHIVE__ROOT)")
    q.set_defaults(func=cmd_archive_query)
    r = asub.add_parser("report", help="the funnel per tenant per day (created … archived), with a PNG chart")
    r.add_argument("--png", help="write the chart here")
    r.add_argument("--tenant")
    r.add_argument("--root", help="archive root (default: CREDENCE_ARCHIVE__ROOT)")
    r.set_defaults(func=cmd_archive_report)

    p = sub.add_parser("forget", help="delete a user: tables and compacted changelogs, and Parquet shards",
                       description="Sends a forget request to every partition owner (their table keys are "
                                   "tombstoned), then rewrites the affected archive shards without the user's rows.")
    p.add_argument("tenant")
    p.add_argument("user")
    p.add_argument("--archive-only", action="store_true", help="only rewrite the Parquet shards")
    p.add_argument("--root", help="archive root (default: CREDENCE_ARCHIVE__ROOT)")
    p.set_defaults(func=cmd_forget)


def log_level(args) -> str:
    """The level asked for (after the command or before it), else the command's default: a stdio MCP client
    shows the proxy's stderr to its user, so `mcp` logs warnings and errors only."""
    asked = getattr(args, "command_log_level", None) or args.log_level
    return asked or ("WARNING" if args.command == "mcp" else "INFO")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.log_level = log_level(args)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("aiokafka", "httpx"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(args.log_level)))
    try:
        return args.func(args)
    except CredenceError as exc:
        return failed(f"credence: error: {exc}")
    except KafkaError as exc:  # e.g. an unreachable --bootstrap: say so, no traceback
        return failed(f"credence: error: Kafka: {exc}")


def failed(message: str) -> int:
    """The one line a failed command ends with. A client the failure abandoned may leave connection
    futures whose errors asyncio logs when they are collected at exit: the line already says what
    happened, so they are not logged again."""
    print(message, file=sys.stderr)
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    return 2


if __name__ == "__main__":
    sys.exit(main())
