"""Right to be forgotten: `credence forget TENANT USER` removes the user from the worker's tables (their
changelogs get tombstones) and from every Parquet shard, and leaves everyone else as they were."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import pyarrow.dataset as ds
import pytest

from credence.config.pipeline import PipelineSettings
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE, EVIDENCE
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.cli import main as cli
from credence.streams.ops.replay import replay, send_control
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.state import redo
from tests.support.pipeline import discard

pytestmark = pytest.mark.integration


def turns() -> list[dict]:
    out = []
    for user in ("ann", "ben"):
        for character in ("barista", "tutor"):
            for i, text in enumerate(["I love green tea.", "I am learning Rust.", "I love green tea."]):
                out.append({"v": 1, "tenant": "acme", "user": user, "character": character,
                            "turn_id": f"{user}-{character}-{i}", "role": "user", "text": text,
                            "ts": f"2026-05-0{i + 1}T10:00:00Z"})
    return out


async def read_changelog(bootstrap: str, topic: str) -> dict[str, bytes | None]:
    """Each key's latest committed value in a changelog (None: a tombstone), read up to the partitions'
    ends (tests.support.turns.read_topic), not until a poll comes back empty (1.5 s of nothing a read)."""
    from aiokafka.admin import AIOKafkaAdminClient

    from credence.kafka import client_options
    from tests.support.turns import read_topic

    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        (described,) = await admin.describe_topics([topic])
        partitions = len(described["partitions"])
    finally:
        await admin.close()
    latest: dict[str, bytes | None] = {}
    for m in await read_topic(bootstrap, topic, partitions):
        latest[json.loads(m.key) if m.key.startswith(b'"') else m.key.decode()] = m.value
    return latest


def test_forget_removes_the_user_everywhere_and_only_them(settings_factory, kafka_bootstrap, tmp_path, monkeypatch):
    root = tmp_path / "archive"
    settings = settings_factory(topic_partitions=2, archive={"root": str(root)},
                                pipeline=PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False,
                                                          tick_interval_seconds=1.0))
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in turns()))
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    try:
        asyncio.run(replay(path, kafka_bootstrap, settings, progress=False))
        asyncio.run(send_control(kafka_bootstrap, settings, [f"acme/{u}/{c}" for u in ("ann", "ben")
                                                             for c in ("barista", "tutor")], "flush"))
        wait_until(lambda: (s := worker.get("/status"))["stats"]["turns_accepted"] == 12
                   and s["busy_scopes"] == 0 and s["llm"]["inflight"] == 0, 60, "the turns to settle")
        asyncio.run(drain(kafka_bootstrap, settings.topic("evidence"), EVIDENCE, settings.archive))
        asyncio.run(drain(kafka_bootstrap, settings.topic("archive"), ARCHIVE, settings.archive))
        before = ds.dataset(root / "evidence", format="parquet", partitioning="hive").to_table(["user"])
        assert set(before.column("user").to_pylist()) == {"ann", "ben"}

        for key, value in settings_env_items(settings).items():
            monkeypatch.setenv(key, value)
        assert cli(["forget", "acme", "ann"]) == 0

        wait_until(lambda: set(worker.get("/scopes")["scopes"]) == {"acme/ben/barista", "acme/ben/tutor"}, 60,
                   "the worker to drop ann's scopes")
        after = ds.dataset(root / "evidence", format="parquet", partitioning="hive").to_table(["user"])
        assert set(after.column("user").to_pylist()) == {"ben"}
        assert after.num_rows == before.num_rows - before.column("user").to_pylist().count("ann")
        # the compacted changelogs hold tombstones for every key of ann's (the value is gone after compaction)
        scopes = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, "scopes")))
        assert {k for k, v in scopes.items() if "/ann/" in k} and all(
            v is None for k, v in scopes.items() if "/ann/" in k)
        assert all(v is not None for k, v in scopes.items() if "/ben/" in k)
        seen = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, "seen")))
        assert all(v is None for k, v in seen.items() if "/ann/" in k)
        # each partition's last redo record holds ann's keys only as deletions, and no older, longer batch's
        # part with her data is left beside it
        by_partition: dict[str, list] = {}
        for k, v in seen.items():
            if redo.is_redo_key(k) and v is not None:
                by_partition.setdefault(k.split("\x1f")[1], []).append(redo.decode_part(v))
        assert by_partition and all(len({p.batch for p in parts}) == 1 for parts in by_partition.values())
        assert all(w.value is None for parts in by_partition.values() for w in redo.decode_writes(parts)
                   if "/ann/" in w.key)
        for table in ("entries", "history"):  # each entry and its signal history live under their own keys
            kept = asyncio.run(read_changelog(kafka_bootstrap, changelog_topic(settings, table)))
            assert {k for k in kept if "/ann/" in k} and all(v is None for k, v in kept.items() if "/ann/" in k)
            assert any(v is not None for k, v in kept.items() if "/ben/" in k)
        assert cli(["forget", "acme", "ann", "--archive-only"]) == 0  # idempotent

        # The marker names no one, and forgets one life of ann's: back again, she is
        # archived again (her new rows are past the marker's cut-off), her forgotten rows stay out
        path.write_text("".join(json.dumps(t | {"turn_id": f"back-{t['turn_id']}", "ts": "2026-05-10T10:00:00Z"})
                                + "\n" for t in turns() if t["user"] == "ann"))
        asyncio.run(replay(path, kafka_bootstrap, settings, progress=False))
        asyncio.run(send_control(kafka_bootstrap, settings, ["acme/ann/barista", "acme/ann/tutor"], "flush"))
        wait_until(lambda: (s := worker.get("/status"))["stats"]["turns_accepted"] == 18
                   and s["busy_scopes"] == 0 and s["llm"]["inflight"] == 0, 60, "ann's second life to settle")
        asyncio.run(drain(kafka_bootstrap, settings.topic("evidence"), EVIDENCE, settings.archive))
        back = ds.dataset(root / "evidence", format="parquet", partitioning="hive").to_table(["user"])
        assert "ann" in back.column("user").to_pylist()
        back = ds.dataset(root / "evidence", format="parquet", partitioning="hive").to_table(
            ["user", "incarnation"]).to_pylist()
        assert all(r["incarnation"] for r in back if r["user"] == "ann")  # her second life's rows only
        assert len([r for r in back if r["user"] == "ben"]) == after.column("user").to_pylist().count("ben")
        markers = [p.name for p in (root / "_forgotten").rglob("*") if p.is_file()]
        assert len(markers) == 1 and "ann" not in markers[0] and "acme" not in str(markers)
    finally:
        discard(worker)


def settings_env_items(settings) -> dict[str, str]:
    from credence.streams.ops.worker_process import settings_env

    env = settings_env(settings, settings.kafka_bootstrap)
    return {k: v for k, v in env.items() if k.startswith("CREDENCE_")}


SCOPE_PATH = "/v1/tenants/acme/users/ann/characters/barista"
FIRST_LIFE, AS_OF_FIRST = "2026-05-01T10:00:00Z", "2026-05-01T12:00:00Z"
SECOND_LIFE, AS_OF_SECOND = "2026-05-03T10:00:00Z", "2026-05-03T12:00:00Z"


def test_a_forgotten_user_never_comes_back_from_the_journal(settings_factory, kafka_bootstrap, tmp_path):
    """One life of a forgotten user, end to end: forgotten over the API, the user is served nothing as of
    any instant (404: no state), and once back, every fold of the journal — as-of reads, the journal read
    back, the Parquet sink's first-copy-wins — holds only the new life, whose entries reuse the forgotten
    ids; a second worker replaying the same topics from the start ends in the same state."""
    import httpx

    from credence.sinks.analytics import valid_at
    from credence.streams.runtime.journal import entries_from_journal, scope_incarnation
    from credence.tables.scope import Scope
    from tests.support.api import add_tenant
    from tests.support.pipeline import idle_status, topic_values

    settings = settings_factory(topic_partitions=2, archive={"root": str(tmp_path / "archive")},
                                pipeline=PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False))
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    key = add_tenant(kafka_bootstrap, settings, "acme")
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    replayed = None
    try:
        def call(method: str, route: str, on=worker, **kw) -> httpx.Response:
            return httpx.request(method, on.url + route, headers={"Authorization": f"Bearer {key}"},
                                 timeout=30, **kw)

        def entries(on=worker, **params) -> dict[str, dict]:
            answer = call("GET", SCOPE_PATH + "/entries", on=on, params=params)
            assert answer.status_code == 200, answer.text
            return {e["id"]: e for e in answer.json()["entries"]}

        def talk(life: str, ts: str) -> None:
            turns = [{"user": "ann", "character": "barista", "turn_id": f"{life}-{i}", "role": "user",
                      "text": "I love green tea.", "ts": ts} for i in range(2)]
            assert call("POST", "/v1/tenants/acme/turns", json={"turns": turns}).status_code == 202

        def settled(turns: int):
            def done() -> dict[str, dict]:
                status = idle_status(worker, ["acme/ann/barista"])
                return status and status["stats"]["turns_accepted"] == turns and entries()
            return done

        talk("first", FIRST_LIFE)
        first = wait_until(settled(2), 60, "ann's first entries")
        # as-of answers from the scope's kept versions, once the batch that wrote them is durable
        wait_until(lambda: set(entries(as_of=AS_OF_FIRST)) == set(first), 30, "ann's first entries as of then")

        assert call("DELETE", "/v1/tenants/acme/users/ann").status_code == 202
        wait_until(lambda: "acme/ann/barista" not in worker.get("/scopes")["scopes"], 60, "ann to be forgotten")
        for route in ("/entries", "/prompt"):
            gone = call("GET", SCOPE_PATH + route, params={"as_of": AS_OF_FIRST})
            assert gone.status_code == 404 and "no state" in gone.json()["error"], gone.text
        # the commands that fold the journal outside the worker ask the scope's state, which is gone
        scope = Scope("acme", "ann", "barista")
        wait_until(lambda: asyncio.run(scope_incarnation(kafka_bootstrap, settings, scope)) is None, 30,
                   "the scope's tombstone in the scopes changelog")

        talk("second", SECOND_LIFE)
        back = wait_until(settled(4), 60, "ann's entries in her second life")
        wait_until(lambda: set(entries(as_of=AS_OF_SECOND)) == set(back), 30, "her second life as of then")
        assert set(back) == set(first)  # deterministic ids: the same entries again, under the same ids
        assert entries(as_of=AS_OF_FIRST) == {}  # nothing of the forgotten life, though the ids are back
        assert {k: (v["version"], v["text"]) for k, v in entries(as_of=AS_OF_SECOND).items()} == {
            k: (v["version"], v["text"]) for k, v in back.items()}
        prompt = call("GET", SCOPE_PATH + "/prompt", params={"as_of": AS_OF_FIRST})
        assert prompt.status_code == 200 and not prompt.json()["entries"], prompt.text

        journal = [e for e in topic_values(kafka_bootstrap, settings, "evidence") if e["user"] == "ann"]
        old = {e["event_id"] for e in journal if "incarnation" not in e}
        new = {e["event_id"] for e in journal if e.get("incarnation")}
        assert old and new and not old & new  # a new life's events never reuse a forgotten event's id
        life = wait_until(lambda: asyncio.run(scope_incarnation(kafka_bootstrap, settings, scope)), 30,
                          "the scope's second life in the scopes changelog")
        assert {e["incarnation"] for e in journal if e.get("incarnation")} == {life}
        folded = {e.id: e for e in entries_from_journal(journal, life)}
        assert {k: (e.version, e.text) for k, e in folded.items()} == {
            k: (v["version"], v["text"]) for k, v in back.items()}
        asyncio.run(drain(kafka_bootstrap, settings.topic("evidence"), EVIDENCE, settings.archive))
        stored = ds.dataset(tmp_path / "archive" / "evidence", format="parquet", partitioning="hive")
        assert new <= set(stored.to_table(["event_id"]).column("event_id").to_pylist())  # none taken as duplicates
        assert {r["entry_id"]: r["text"] for r in valid_at(settings.archive.root, datetime.fromisoformat(
            AS_OF_SECOND))} == {k: v["text"] for k, v in back.items()}

        # a replay: another worker (its own group and changelogs) reads the same topics from the start
        again = settings_factory(topic_partitions=2, app_id=f"{settings.app_id}-replay", data_dir=tmp_path / "re",
                                 pipeline=settings.pipeline)
        replayed = WorkerProcess(again, kafka_bootstrap, tmp_path / "replay.log").start()
        wanted = {k: (v["version"], v["text"], v["status"]) for k, v in back.items()}
        wait_until(lambda: {k: (v["version"], v["text"], v["status"]) for k, v in entries(on=replayed).items()}
                   == wanted, 90, "the replay to end in the same state")
        assert entries(on=replayed, as_of=AS_OF_FIRST) == {}
    finally:
        if replayed is not None:
            discard(replayed)
        discard(worker)
