"""The archive on object storage: the sink, `archive query`/`report` and `forget` against the project's own
S3-compatible server (s3proxy, the `object_store` fixture), credentials from the standard AWS variables or
from settings. Every result is compared with a run of the same input into a local folder."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from credence.config.archive import ArchiveSettings
from credence.kafka import client_options
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE, ARCHIVE_TABLES, EVIDENCE
from credence.sinks.shards import list_shards, open_archive
from tests.integration.test_sink_archive import archive_record, create_topics
from tests.integration.test_sink_evidence import journal
from tests.support.cli import CliResult, in_process
from tests.support.pipeline import discard

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
RECORDS = 60
SHARD_ROWS = 16
AWS_NAMES = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")


def process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command as a real process (a fresh interpreter: nothing of this one's S3 clients or settings)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CREDENCE_")}
    result = subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", *args], env={**base, **(env or {})},
                            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result


@pytest.fixture
def cli(monkeypatch, capsys, caplog):
    """The command in this process (tests/support/cli.py): the answers are compared, not the process."""
    run = in_process(monkeypatch, capsys, caplog)

    def checked(*args: str, env: dict | None = None) -> CliResult:
        result = run(*args, env=env)
        assert "Traceback" not in result.stderr, result.stderr[-3000:]
        return result

    return checked


def ok(result: CliResult | subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    return result.stdout


async def produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all", enable_idempotence=True))
    await producer.start()
    try:
        for record in records:
            await producer.send(topic, json.dumps(record).encode(),
                                key=f"{record['tenant']}/{record['user']}/{record['character']}".encode())
        await producer.flush()
    finally:
        await producer.stop()


def sink_both(bootstrap: str, prefix: str, local: str, remote: str) -> tuple[str, str]:
    """The same archive and evidence topics sunk into a local folder and into an s3:// root."""
    topics = {ARCHIVE: f"{prefix}.archive", EVIDENCE: f"{prefix}.evidence"}

    async def scenario():
        await create_topics(bootstrap, *topics.values())
        await produce(bootstrap, topics[ARCHIVE], [archive_record(i) for i in range(RECORDS)])
        await produce(bootstrap, topics[EVIDENCE], journal())
        for name, root in (("local", local), ("s3", remote)):
            settings = ArchiveSettings(root=root, max_rows_per_shard=SHARD_ROWS)
            for table, topic in topics.items():
                stats = await drain(bootstrap, topic, table, settings, group_id=f"{prefix}-{name}.{table}")
                assert stats.rows > 0 and stats.dead_lettered == 0

    asyncio.run(scenario())
    return local, remote


@pytest.fixture(scope="module")
def sunk(kafka_bootstrap, object_store, tmp_path_factory) -> tuple[str, str]:
    """Sunk once for the module's read-only tests (the AWS variables stay set while they run)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in object_store.env().items():
            patch.setenv(name, value)
        remote = object_store.create_bucket(f"credence-{uuid.uuid4().hex[:12]}") + "/archive"
        prefix = f"t{uuid.uuid4().hex[:10]}"
        yield sink_both(kafka_bootstrap, prefix, str(tmp_path_factory.mktemp("local") / "archive"), remote)


def shard_digests(root: str) -> dict[str, str]:
    """Every shard of both tables: its path under the root -> the SHA-256 of its bytes."""
    archive = open_archive(root)
    digests = {}
    for table in ARCHIVE_TABLES:
        for path in list_shards(archive, table):
            with archive.fs.open_input_stream(path) as stream:
                digests[path[len(archive.base) + 1:]] = hashlib.sha256(stream.read()).hexdigest()
    return digests


def test_the_sink_writes_byte_identical_shards_to_s3(sunk, object_store):
    local, remote = sunk
    remote_shards = shard_digests(remote)
    assert remote_shards == shard_digests(local)
    assert len(remote_shards) > 2 * RECORDS // SHARD_ROWS
    bucket, prefix = remote.removeprefix("s3://").split("/", 1)
    on_server = {str(p.relative_to(object_store.data_dir / "blobs" / bucket / prefix))
                 for p in (object_store.data_dir / "blobs" / bucket / prefix).rglob("*.parquet")}
    assert on_server == set(remote_shards)  # really stored by the S3 server, nothing else visible


QUERIES = [
    "SELECT count(*) AS n, count(DISTINCT entry_id) AS ids FROM archive",
    'SELECT tenant, kind, "date", "user", count(*) AS n, sum(importance) AS i FROM archive GROUP BY ALL ORDER BY ALL',
    'SELECT * FROM archive ORDER BY topic_partition, "offset"',
    'SELECT * EXCLUDE (snapshot_json) FROM evidence ORDER BY topic_partition, "offset"',
    "SELECT * FROM entry_versions ORDER BY ALL",
]


@pytest.mark.parametrize("sql", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_archive_query_over_s3_equals_the_local_run(sunk, sql, cli):
    local, remote = sunk
    answer = ok(cli("archive", "query", sql, "--format", "json", "--root", remote))
    assert json.loads(answer), "no rows: the comparison would prove nothing"
    assert answer == ok(cli("archive", "query", sql, "--format", "json", "--root", local))


def test_archive_report_over_s3_equals_the_local_run(sunk, tmp_path, cli):
    local, remote = sunk
    answer = ok(cli("archive", "report", "--root", remote, "--png", str(tmp_path / "funnel.png")))
    assert "(0 rows)" not in answer and (tmp_path / "funnel.png").stat().st_size > 0
    assert answer.replace(str(tmp_path / "funnel.png"), "") == ok(cli("archive", "report", "--root", local)) + "chart written to \n"


def test_credentials_come_from_settings_when_the_aws_variables_are_unset(sunk, object_store):
    _, remote = sunk
    env = {name: "" for name in AWS_NAMES}
    settings = {"CREDENCE_ARCHIVE__S3_ENDPOINT_URL": object_store.endpoint,
                "CREDENCE_ARCHIVE__S3_ACCESS_KEY_ID": object_store.access_key,
                "CREDENCE_ARCHIVE__S3_REGION": object_store.region}
    sql = "SELECT count(*) AS n FROM archive"
    # Real processes: the variables unset must reach a client no earlier call in this process configured.
    wrong = process("archive", "query", sql, "--root", remote,
                env=env | settings | {"CREDENCE_ARCHIVE__S3_SECRET_ACCESS_KEY": "not-the-secret"})
    assert wrong.returncode == 2 and "credence: error" in wrong.stderr, wrong.stderr[-1500:]
    right = process("archive", "query", sql, "--format", "csv", "--root", remote,
                env=env | settings | {"CREDENCE_ARCHIVE__S3_SECRET_ACCESS_KEY": object_store.secret_key})
    assert ok(right).split() == ["n", str(RECORDS)]


def test_forget_removes_the_user_from_the_remote_shards(kafka_bootstrap, topic_prefix, tmp_path, s3_root, cli):
    local, remote = sink_both(kafka_bootstrap, topic_prefix, str(tmp_path / "archive"), s3_root)
    tenant, user = "tenant-1", "user 3"  # archive_record(i): tenant-{i % 3}, user {i % 5}
    said = ok(cli("forget", tenant, user, "--archive-only", "--root", remote))
    assert said == ok(cli("forget", tenant, user, "--archive-only", "--root", local))
    assert "removed 4 rows" in said  # i in 0..59 with i % 15 == 13
    assert shard_digests(remote) == shard_digests(local)
    left = 'SELECT count(*) AS n FROM archive WHERE tenant = ? AND "user" = ?'
    assert ok(cli("archive", "query", left, "--param", tenant, "--param", user, "--format", "csv",
                  "--root", remote)).split() == ["n", "0"]
    assert "removed 0 rows" in ok(cli("forget", tenant, user, "--archive-only", "--root", remote))
    assert Path(local, "_forgotten").is_dir()


def test_a_forget_marker_on_s3_names_no_one_and_forgets_one_life(kafka_bootstrap, topic_prefix, tmp_path,
                                                                 s3_root, object_store, cli):
    """The forget marker on object storage, against a local run of the same input: the marker's key is a
    digest, and its cut-off (per partition: the incarnation the user's scopes begin after the forget)
    drops only the forgotten life's rows — the same user archived again in a new life is kept."""
    from credence.sinks.forget import forget_user, forgotten_markers, marker_name

    topic, tenant, user = f"{topic_prefix}.archive", "tenant-1", "user 3"  # i % 15 == 13: 4 rows
    cutoff = dict.fromkeys(range(4), 5)
    roots = {"local": str(tmp_path / "archive"), "s3": s3_root}

    async def sink_all():
        for name, root in roots.items():
            await drain(kafka_bootstrap, topic, ARCHIVE, ArchiveSettings(root=root, max_rows_per_shard=SHARD_ROWS),
                        group_id=f"{topic_prefix}-{name}")

    async def scenario():
        await create_topics(kafka_bootstrap, topic)
        await produce(kafka_bootstrap, topic, [archive_record(i) for i in range(RECORDS)])
        await sink_all()
        for root in roots.values():
            assert forget_user(root, tenant, user, ArchiveSettings(root=root), cutoff).rows_removed == 4
        # back again: two of the same entries archived in the new life, and a late copy of the old life's
        back = [archive_record(13) | {"incarnation": 5}, archive_record(28) | {"incarnation": 6},
                archive_record(43)]
        await produce(kafka_bootstrap, topic, back)
        await sink_all()

    asyncio.run(scenario())
    assert shard_digests(s3_root) == shard_digests(roots["local"])
    left = 'SELECT entry_id, incarnation FROM archive WHERE tenant = ? AND "user" = ? ORDER BY ALL'
    answer = ok(cli("archive", "query", left, "--param", tenant, "--param", user, "--format", "json",
                    "--root", s3_root))
    assert json.loads(answer) == [{"entry_id": "e13", "incarnation": 5}, {"entry_id": "e28", "incarnation": 6}]
    bucket, prefix = s3_root.removeprefix("s3://").split("/", 1)
    stored = object_store.data_dir / "blobs" / bucket / prefix / "_forgotten"
    assert [p.name for p in stored.rglob("*") if p.is_file()] == [marker_name(tenant, user)]  # no name in it
    assert forgotten_markers(open_archive(s3_root)).cutoff(tenant, user) == cutoff


def stored_objects(object_store, root: str) -> dict[str, tuple[int, int]]:
    """Every object the S3 server holds under ``root``: its key -> (inode, mtime) of the server's file, which a
    new upload of the same key replaces."""
    bucket, prefix = root.removeprefix("s3://").split("/", 1)
    base = object_store.data_dir / "blobs" / bucket / prefix
    return {str(p.relative_to(base)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in base.rglob("*") if p.is_file()}



def test_a_second_drain_uploads_nothing_and_a_later_one_only_what_is_new(kafka_bootstrap, topic_prefix, tmp_path,
                                                                         s3_root, object_store):
    """A drain ends with its partial spans published and committed: before, each drain re-read everything
    since the last full span and uploaded its shards again (a paid PUT per shard)."""
    topic, group = f"{topic_prefix}.archive", f"{topic_prefix}-sink"
    settings = ArchiveSettings(root=s3_root, max_rows_per_shard=1000)  # 60 records: every span stays partial

    async def scenario():
        await create_topics(kafka_bootstrap, topic)
        await produce(kafka_bootstrap, topic, [archive_record(i) for i in range(RECORDS)])
        first = await drain(kafka_bootstrap, topic, ARCHIVE, settings, group_id=group)
        before = stored_objects(object_store, s3_root)
        second = await drain(kafka_bootstrap, topic, ARCHIVE, settings, group_id=group)
        after = stored_objects(object_store, s3_root)
        await produce(kafka_bootstrap, topic, [archive_record(i) for i in range(RECORDS, RECORDS + 5)])
        third = await drain(kafka_bootstrap, topic, ARCHIVE, settings, group_id=group)
        local = str(tmp_path / "archive")
        await drain(kafka_bootstrap, topic, ARCHIVE, ArchiveSettings(root=local, max_rows_per_shard=1000),
                    group_id=f"{group}-local")
        return first, before, second, after, third, local

    first, before, second, after, third, local = asyncio.run(scenario())
    assert first.shards_published == len(before) > 0 and first.rows == RECORDS
    assert (second.records, second.shards_published) == (0, 0)  # nothing read, nothing uploaded
    assert after == before  # no object written again
    # Five new records: only the shards they land in are uploaded, and the archive equals one drain of it all.
    assert 0 < third.shards_published <= 5 < len(before)
    assert shard_digests(s3_root) == shard_digests(local)


def test_a_deleted_entry_leaves_the_s3_archive(settings_factory, kafka_bootstrap, tmp_path, s3_root):
    """Deleting one entry: `DELETE …/entries/{id}` on a worker whose archive is on s3://: the receipt's archive part
    rewrites the remote shards, its marker names no one, and a sink replay from offset 0 leaves the rows out
    (here beside the suite's other s3:// tests, to share their object store)."""
    import pyarrow.fs as pafs

    from credence.streams.ops.worker_process import WorkerProcess
    from tests.integration.test_entry_delete import _archived, _delete, _gone_from_reads, _world
    from tests.support.api import client

    settings, key = _world(settings_factory, kafka_bootstrap, tmp_path, s3_root)
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    try:
        api = client(worker, key, "acme")
        entry = _delete(kafka_bootstrap, settings, worker, api)
        _gone_from_reads(api, entry.id)  # the changelogs: test_entry_delete, the same whatever the archive
        rows = _archived(s3_root, settings)
        assert rows and not [r for r in rows if r["text"] == entry.text]
        assert all(r["text"] == "" for r in rows if r["entry_id"] == entry.id)
        archive = open_archive(s3_root, settings.archive)
        names = [i.path for i in archive.fs.get_file_info(pafs.FileSelector(f"{archive.base}/_erased"))]
        assert len(names) == 1 and "ann" not in str(names) and "acme" not in str(names)
    finally:
        discard(worker)
