"""Hostile command lines and settings: `forget` and `archive query --param` arguments, and settings in
environment variables. Each is refused with exit 2 and a message on stderr — never a traceback — and
nothing is half-done (no forgotten-marker, no file written). No broker needed: every case fails before
Kafka would be asked (forget runs --archive-only); the s3:// root cases use the session's s3proxy.

The cases run the command line's `main()` in this process (a fresh interpreter per case cost ~1.5 s, ~100 s
for the module): what they check is the message and the exit code, which `main` decides. An exception
escaping `main` fails the case (it would be a traceback), and so does a traceback in what it logged.
`test_the_command_itself_exits_2_with_the_message` runs a few of them as real processes, for what only a
process shows: the exit status and stderr of `python -m credence.streams.ops.cli`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.faults.hostile import BAD_IDS
from tests.support.cli import CliResult, in_process

ARGV_SAFE_BAD_IDS = {k: v for k, (v, _) in BAD_IDS.items() if isinstance(v, str) and "\x00" not in v}


def process(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    """The command line as a real process, with no CREDENCE_* settings but `env`'s."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CREDENCE_")}
    return subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", *args], env=base | (env or {}),
                          capture_output=True, text=True, timeout=60, cwd=cwd, stdin=subprocess.DEVNULL)


@pytest.fixture
def cli(monkeypatch, capsys, caplog):
    return in_process(monkeypatch, capsys, caplog)


def refused(result: CliResult | subprocess.CompletedProcess) -> str:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    assert result.returncode == 2, (result.returncode, result.stdout[-500:], result.stderr[-1500:])
    assert result.stderr.strip(), "refused without saying why"
    return result.stderr


@pytest.mark.parametrize("kind", sorted(ARGV_SAFE_BAD_IDS))
@pytest.mark.parametrize("part", ["tenant", "user"])
def test_forget_refuses_bad_ids_and_writes_nothing(kind, part, tmp_path, cli):
    args = {"tenant": "acme", "user": "alice"} | {part: ARGV_SAFE_BAD_IDS[kind]}
    root = tmp_path / "archive"
    err = refused(cli("forget", args["tenant"], args["user"], "--archive-only", "--root", str(root)))
    assert part in err
    assert not root.exists() or not any(root.rglob("*")), "a refused forget left files behind"


HOSTILE_QUERIES = [
    (["SELECT ?", "--param", '{"broken'], ["--json-params"], r"not JSON"),
    (["SELECT ? ,?", "--param", "1"], [], r"query failed"),
    (["DROP TABLE archive; SELECT 1"], [], r"query refused"),
    (["SELECT ?", "--param", "x" * 100_000], ["--format", "xml"], r"invalid choice"),
    (["SELEC broken"], [], r"query failed"),
]


@pytest.mark.parametrize("args,extra,reason", HOSTILE_QUERIES, ids=[str(i) for i in range(len(HOSTILE_QUERIES))])
def test_archive_query_refuses_hostile_sql_and_params(args, extra, reason, tmp_path, cli):
    import re

    err = refused(cli("archive", "query", *args, *extra, "--root", str(tmp_path / "archive")))
    assert re.search(reason, err), err[-800:]


def test_archive_query_binds_hostile_params_as_plain_values(tmp_path, cli):
    hostile = "'; DROP TABLE archive; --"
    result = cli("archive", "query", "SELECT ? AS v, length(?) AS n", "--param", hostile, "--param", "é" * 5000,
                 "--format", "json", "--root", str(tmp_path / "archive"))
    assert result.returncode == 0, result.stderr[-1500:]
    assert hostile.replace('"', '\\"') in result.stdout and '"n": 5000' in result.stdout.replace(" ", " ")


BAD_SETTINGS = {
    "CREDENCE_TOPIC_PARTITIONS": ["abc", "0", "-3", "1e9", ""],
    "CREDENCE_TOPIC_PREFIX": ["a/b", "..", "x" * 300, "bad prefix", ""],
    "CREDENCE_LLM__BACKEND": ["gpt-9", ""],
    "CREDENCE_LLM__TIMEOUT_S": ["-1", "soon"],
    "CREDENCE_MEMORY": ['{"broken', "[1, 2]"],
    "CREDENCE_MEMORY__REINFORCEMENT_HALF_LIFE_DAYS": ["0", "-30", "nan", "inf"],
    "CREDENCE_PIPELINE__STAGE1_MAX_BATCH": ["0", "many"],
    "CREDENCE_KAFKA_SESSION_TIMEOUT_S": ["-5"],
    "CREDENCE_TABLE_STORE": ["postgres"],
}
SETTING_CASES = [(k, v) for k, vs in BAD_SETTINGS.items() for v in vs]


@pytest.mark.parametrize("name,value", SETTING_CASES, ids=[f"{k}={v[:12]!r}" for k, v in SETTING_CASES])
def test_bad_settings_are_refused_before_anything_runs(name, value, tmp_path, cli):
    (tmp_path / "t.jsonl").write_text("")
    err = refused(cli("replay", str(tmp_path / "t.jsonl"), "--bootstrap", "127.0.0.1:1",
                      env={name: value}, cwd=tmp_path))
    assert "settings" in err or name.split("__")[-1].lower().removeprefix("credence_") in err.lower(), err[-800:]


def test_an_unreachable_bootstrap_is_a_message_not_a_traceback(tmp_path):
    (tmp_path / "t.jsonl").write_text('{"v": 1}\n')
    err = refused(process("replay", str(tmp_path / "t.jsonl"), "--bootstrap", "127.0.0.1:1", cwd=tmp_path))
    assert "Kafka" in err and "127.0.0.1" in err


TENANT_CASES = [(["add", v], "tenant") for v in ARGV_SAFE_BAD_IDS.values()] + [
    (["add", "acme", "--requests-per-second", "-5"], "greater than 0"),
    (["add", "acme", "--requests-per-second", "nan"], "requests"),
    (["add", "acme", "--burst", "0"], "burst"),
    (["set", "..", "--burst", "5"], "tenant"),
    (["rotate-key", "a/b"], "tenant"),
    (["remove", " acme"], "tenant"),
]


@pytest.mark.parametrize("args,says", TENANT_CASES, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(TENANT_CASES)])
def test_tenants_refuses_bad_names_and_settings_before_touching_kafka(args, says, tmp_path, cli):
    err = refused(cli("tenants", *args, env={"CREDENCE_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, cwd=tmp_path))
    assert says.lower() in err.lower(), err[-800:]


@pytest.mark.parametrize("sql, says", [
    ("COPY (SELECT 1) TO '{tmp}/out.csv'", "only SELECT"),
    ("COPY (SELECT 1) TO '{root}/archive/evil.parquet'", "only SELECT"),
    ("ATTACH '{tmp}/other.db'", "only SELECT"),
    ("SET enable_external_access = true", "only SELECT"),
    ("INSTALL httpfs", "only SELECT"),
    ("SELECT 1; SELECT 2", "one statement"),
    ("SELECT * FROM read_csv('{tmp}/secret.csv')", "Permission"),
    ("SELECT * FROM read_text('/etc/hostname')", "Permission"),
])
def test_archive_query_is_one_select_that_reads_only_the_archive(sql, says, tmp_path, cli):
    root = tmp_path / "archive"
    (tmp_path / "secret.csv").write_text("password\nhunter2\n")
    err = refused(cli("archive", "query", sql.format(tmp=tmp_path, root=root), "--root", str(root)))
    assert says in err and "hunter2" not in err, err[-800:]
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "other.db").exists()
    assert not list(root.rglob("evil*"))


def test_archive_query_still_reads_the_archive_views(tmp_path, cli):
    result = cli("archive", "query", "SELECT count(*) AS n FROM archive", "--format", "csv",
                 "--root", str(tmp_path / "archive"))
    assert result.returncode == 0 and result.stdout.split() == ["n", "0"], (result.stdout, result.stderr[-800:])


REMOTE_ESCAPES = [
    "SELECT * FROM read_csv('{tmp}/secret.csv')",
    "SELECT * FROM read_parquet('s3://{bucket}/outside/secret.parquet')",
    "SELECT * FROM read_parquet('{root}/../outside/secret.parquet')",
    "SELECT * FROM glob('s3://{bucket}/**')",
    "SELECT * FROM read_text('/etc/hostname')",
]


@pytest.mark.parametrize("sql", REMOTE_ESCAPES, ids=[str(i) for i in range(len(REMOTE_ESCAPES))])
def test_archive_query_over_s3_reads_the_archive_and_nothing_beside_it(sql, tmp_path, s3_root, cli):
    """An s3:// root (the session's s3proxy): the views answer, while a secret in the same bucket but outside
    the root, or on the local disk, stays out of reach."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    from credence.config.archive import ArchiveSettings
    from credence.sinks.schema import ARCHIVE, to_row
    from credence.sinks.shards import open_archive, write_shards
    from tests.unit.sinks.conftest import make_archive_record

    bucket = s3_root.removeprefix("s3://").split("/")[0]
    fs, _ = pafs.FileSystem.from_uri(s3_root)
    pq.write_table(pa.table({"password": ["hunter2"]}), f"{bucket}/outside/secret.parquet", filesystem=fs)
    (tmp_path / "secret.csv").write_text("password\nhunter2\n")
    settings = ArchiveSettings(root=s3_root)
    write_shards(open_archive(s3_root), ARCHIVE, 0, [to_row(ARCHIVE, make_archive_record(), 0, 0)], settings)

    answer = cli("archive", "query", "SELECT count(*) AS n FROM archive", "--format", "csv", "--root", s3_root)
    assert answer.returncode == 0 and answer.stdout.split() == ["n", "1"], (answer.stdout, answer.stderr[-800:])
    err = refused(cli("archive", "query", sql.format(tmp=tmp_path, bucket=bucket, root=s3_root), "--root", s3_root))
    assert "Permission" in err and "hunter2" not in err, err[-800:]


PROCESS_CASES = [
    (["forget", "acme", "..", "--archive-only", "--root", "{tmp}/archive"], {}, "user"),
    (["archive", "query", "SELECT ?", "--param", "1", "--format", "xml", "--root", "{tmp}/archive"], {},
     "invalid choice"),
    (["archive", "query", "ATTACH '{tmp}/other.db'", "--root", "{tmp}/archive"], {}, "only SELECT"),
    (["tenants", "add", "a/b"], {"CREDENCE_KAFKA_BOOTSTRAP": "127.0.0.1:1"}, "tenant"),
    (["replay", "{tmp}/t.jsonl", "--bootstrap", "127.0.0.1:1"], {"CREDENCE_TOPIC_PARTITIONS": "abc"}, "partitions"),
]


@pytest.mark.parametrize("args,env,says", PROCESS_CASES, ids=[a[0] for a, _, _ in PROCESS_CASES])
def test_the_command_itself_exits_2_with_the_message(args, env, says, tmp_path):
    """One case of each kind above, as the process a user runs: its exit status is 2 and its stderr says
    why, with no traceback (what `main` returns becomes the status only through `sys.exit(main())`)."""
    (tmp_path / "t.jsonl").write_text("")
    err = refused(process(*(a.format(tmp=tmp_path) for a in args), env=env, cwd=tmp_path))
    assert says.lower() in err.lower(), err[-800:]
    assert not (tmp_path / "archive").exists() and not (tmp_path / "other.db").exists()


PORTING_CASES = [
    (["export", "acme/../x", "--out", "{tmp}/out.jsonl"], "dot path"),
    (["export", "acme/kim/aria/extra", "--out", "{tmp}/out.jsonl"], "select a tenant"),
    (["export", "acme", "--out", "{tmp}/out.jsonl", "--at", "2026-01-01T00:00:00"], "UTC offset"),
    (["import", "{tmp}/not-an-export.jsonl"], "not a credence export"),
    (["import", "{tmp}/newer.jsonl"], "reads version 1"),
    (["import"], "name the export file"),
    (["import", "--from-neko", "{tmp}"], "--tenant"),
    (["import", "--from-neko", "{tmp}", "--tenant", "acme", "--user", "a/b"], "user"),
    (["import", "--from-neko", "{tmp}", "--tenant", "acme", "--user", "kim", "--timezone", "Mars/Olympus"],
     "unknown time zone"),
]


@pytest.mark.parametrize("args,says", PORTING_CASES, ids=[f"{a[0]}-{i}" for i, (a, _) in enumerate(PORTING_CASES)])
def test_export_and_import_refuse_bad_input_before_touching_kafka(args, says, tmp_path, cli):
    (tmp_path / "not-an-export.jsonl").write_text('{"v": 1, "tenant": "acme"}\n')
    (tmp_path / "newer.jsonl").write_text('{"type":"header","format":"credence-export","format_version":2}\n')
    err = refused(cli(*(a.format(tmp=tmp_path) for a in args), env={"CREDENCE_KAFKA_BOOTSTRAP": "127.0.0.1:1"},
                      cwd=tmp_path))
    assert says.lower() in err.lower(), err[-800:]
    assert not (tmp_path / "out.jsonl").exists()  # nothing half-written
