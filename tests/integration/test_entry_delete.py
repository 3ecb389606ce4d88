"""Deleting one entry end to end: `DELETE …/entries/{id}` answers an erasure receipt, and no trace of the entry
remains — state stores (the API's reads), the compacted changelogs (each key's latest value, what compaction
keeps), the Parquet shards (a sink replay from offset 0 included; s3://: test_sink_s3.py), /recall — after a
restart and after a replay of the topics by a fresh worker; a later restatement is new evidence and brings it
back; "remember this" goes through the evidence path."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from credence.config.pipeline import PipelineSettings
from credence.sinks.consumer import drain
from credence.sinks.schema import ARCHIVE, ARCHIVE_TABLES, EVIDENCE
from credence.sinks.shards import list_shards, open_archive, read_shard
from credence.streams.ops.admin import changelog_topic, ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.runtime.topics import STATE_TABLES
from tests.support.api import add_tenant, client
from tests.support.pipeline import discard, idle_status

pytestmark = pytest.mark.integration

SCOPE = "acme/ann/barista"
SAID = "I have a cat named Miso."


def _turns(prefix: str, ts: str) -> list[dict]:
    return [{"user": "ann", "character": "barista", "turn_id": f"{prefix}-{i}", "role": "user", "text": text,
             "ts": ts} for i, text in enumerate([SAID, "I love green tea."])]


def _settled(worker, api, turns: int):
    def done():
        status = idle_status(worker, [SCOPE])
        return status and status["stats"]["turns_accepted"] >= turns and {
            e.id: e for e in api.entries("ann", "barista").entries}
    return done


def _sink(bootstrap, settings, from_beginning: bool = False) -> None:
    for topic, table in (("evidence", EVIDENCE), ("archive", ARCHIVE)):
        asyncio.run(drain(bootstrap, settings.topic(topic), table, settings.archive, from_beginning=from_beginning))


def _archived(root: str, settings) -> list[dict]:
    archive = open_archive(root, settings.archive)
    rows = []
    for table in ARCHIVE_TABLES:
        for path in list_shards(archive, table, "acme"):
            rows += read_shard(archive, path, ["entry_id", "version", "text"]).to_pylist()
    return rows


async def _changelogs(bootstrap: str, settings) -> dict[tuple[str, str], bytes | None]:
    """Every state table's changelog as compaction keeps it: each key's latest value, one consumer for all."""
    from aiokafka import AIOKafkaConsumer

    from credence.kafka import client_options

    topics = {changelog_topic(settings, t): t for t in STATE_TABLES}
    consumer = AIOKafkaConsumer(*topics, **client_options(bootstrap, auto_offset_reset="earliest",
                                                           enable_auto_commit=False, isolation_level="read_committed"))
    await consumer.start()
    latest: dict[tuple[str, str], bytes | None] = {}
    try:
        while batch := await consumer.getmany(timeout_ms=1500):
            for msgs in batch.values():
                for m in msgs:
                    latest[(topics[m.topic], m.key.decode(errors="replace"))] = m.value
    finally:
        await consumer.stop()
    return latest


def _gone_from_reads(api, entry_id: str) -> None:
    assert entry_id not in {e.id for e in api.entries("ann", "barista").entries}
    assert not [h for h in api.recall("ann", "barista", "cat named Miso").hits if h.id == entry_id]


def _no_trace(bootstrap, settings, worker, api, entry_id: str, text: str) -> None:
    _gone_from_reads(api, entry_id)
    latest = asyncio.run(_changelogs(bootstrap, settings))
    assert {table for table, _ in latest} >= {"scopes", "entries", "history"}
    live = {(t, k): v for (t, k), v in latest.items() if v is not None}
    assert not [k for (t, k) in live if entry_id in k and t != "seen"]  # tombstones only
    assert not [k for k, v in live.items() if text.encode() in v]
    rows = _archived(settings.archive.root, settings)
    assert not [r for r in rows if r["text"] == text]
    assert all(r["text"] == "" for r in rows if r["entry_id"] == entry_id)  # the erased event only


def _world(settings_factory, kafka_bootstrap, tmp_path, root: str):
    settings = settings_factory(topic_partitions=2, archive={"root": root},
                                pipeline=PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False))
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    key = add_tenant(kafka_bootstrap, settings, "acme")
    return settings, key


def _delete(bootstrap, settings, worker, api):
    assert api.send_turns(_turns("old", "2026-05-01T10:00:00Z")).accepted == 2
    entries = wait_until(_settled(worker, api, 2), 60, "ann's entries")
    [entry] = [e for e in entries.values() if "Miso" in e.text]
    _sink(bootstrap, settings)
    assert [r for r in _archived(settings.archive.root, settings) if r["text"] == entry.text]
    receipt = api.delete_entry("ann", "barista", entry.id, by="ann", reason="not my cat")
    assert receipt.applied and receipt.erased_ids == [entry.id]
    stores = {s.store: s for s in receipt.stores}
    assert stores["scope state"].removed == 1 and stores["signal history"].removed >= 1
    assert stores["entry versions"].removed >= 1 and stores["Parquet archive"].removed >= 1
    assert all(s.remaining == 0 for s in receipt.stores) and [k.store for k in receipt.kept] == ["journal topic"]
    _sink(bootstrap, settings, from_beginning=True)  # a sink replay of the journal: the marker keeps them out
    return entry


def test_a_deleted_entry_leaves_no_trace_and_stays_gone(settings_factory, kafka_bootstrap, tmp_path, capsys):
    settings, key = _world(settings_factory, kafka_bootstrap, tmp_path, str(tmp_path / "archive"))
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log").start()
    replayed = None
    # A worker dies with the thread that started it (die_with_parent): the pool's threads outlive them.
    pool = ThreadPoolExecutor(2)
    try:
        api = client(worker, key, "acme")
        entry = _delete(kafka_bootstrap, settings, worker, api)
        _no_trace(kafka_bootstrap, settings, worker, api, entry.id, entry.text)
        assert api.entries("ann", "barista").entries  # the tea entry stays
        _hostile(worker, key, add_tenant(kafka_bootstrap, settings, "globex"),
                 api.entries("ann", "barista").entries[0].id)

        # a restart of this worker (its stores from disk and the changelogs) and, meanwhile, a replay: a fresh
        # worker (its own group and changelogs) reads the same topics from the start
        again = settings_factory(topic_partitions=2, app_id=f"{settings.app_id}-replay", data_dir=tmp_path / "re",
                                 archive=settings.archive, pipeline=settings.pipeline)
        replayed = WorkerProcess(again, kafka_bootstrap, tmp_path / "replay.log")
        worker.stop()
        list(pool.map(lambda w: w.start(), (worker, replayed)))  # both start at once: half the wait
        api, other = client(worker, key, "acme"), client(replayed, key, "acme")
        wait_until(_settled(worker, api, 0), 60, "the restarted worker")
        _gone_from_reads(api, entry.id)  # the changelogs and shards are as checked above
        wait_until(_settled(replayed, other, 2), 90, "the replay to settle")
        _gone_from_reads(other, entry.id)
        replayed.stop()
        replayed = None

        # the user says it again, later: new evidence, the entry may come back (its version line goes on)
        assert api.send_turns(_turns("new", "2026-05-02T10:00:00Z")).accepted == 2
        back = wait_until(lambda: {e.id: e for e in api.entries("ann", "barista").entries}.get(entry.id), 60,
                          "the restatement to create it again")
        assert back.version > entry.version + 1

        made = api.remember("ann", "barista", "The user is allergic to peanuts.", importance=9)
        peanuts = wait_until(lambda: [e for e in api.entries("ann", "barista").entries if "peanuts" in e.text],
                             60, "the remembered statement to become an entry")
        assert peanuts[0].status == "pending" and made.remember_id
        wait_until(lambda: [h.cause for h in api.entry("ann", "barista", peanuts[0].id).history][:1]
                   == ["user_remember"], 30, "the remembered entry's history")  # written with its batch

        # the command line: the same receipt, printed; an unknown id exits 2 with the API's reason
        from credence.streams.ops.cli import main as cli

        key_file = tmp_path / "acme.key"
        key_file.write_text(key)
        base = ["memory", "delete", SCOPE, peanuts[0].id, "--url", worker.url, "--key-file", str(key_file)]
        assert cli(base + ["--by", "ann", "--reason", "changed my mind"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["applied"] and printed["erased_ids"] == [peanuts[0].id] and printed["by"] == "ann"
        again = api.delete_entry("ann", "barista", peanuts[0].id)  # idempotent: the archive part finished again
        assert again.applied and all(s.remaining == 0 for s in again.stores) and again.by == "ann"
        assert cli(base[:3] + ["r-nope"] + base[4:]) == 2 and "no entry" in capsys.readouterr().err

        tea = next(e for e in api.entries("ann", "barista").entries if "tea" in e.text)
        edited = api.edit_text("ann", "barista", tea.id, "The user loves jasmine green tea.")
        assert edited.applied and edited.entry.text == "The user loves jasmine green tea."
        assert [(v.text, v.reason) for v in edited.version_history] == [(tea.text, "user_edit")]
        wait_until(lambda: [h.cause for h in api.entry("ann", "barista", tea.id).history][-1:] == ["user_edit:user"], 30,
                   "the edit in the entry's signal history")
    finally:
        if replayed is not None:
            discard(replayed)
        discard(worker)
        pool.shutdown()


def _hostile(worker, key: str, other_key: str, entry_id: str) -> None:
    """Bad ids, another tenant's entry, oversized or unreadable text: refused with a reason, nothing sent."""
    import httpx

    scope = "/v1/tenants/acme/users/ann/characters/barista"

    def call(method, path, key=key, **kw):
        return httpx.request(method, worker.url + scope + path, headers={"Authorization": f"Bearer {key}"},
                             timeout=30, **kw)

    for method, path, kw, status, reason in [
        ("DELETE", "/entries/nope", {}, 404, "no entry"),
        ("DELETE", "/entries/" + "x" * 300, {}, 400, "characters"),  # the path-part rule
        ("DELETE", f"/entries/{entry_id}", {"params": {"reason": "x" * 201}}, 422, "reason"),
        ("POST", "/entries", {"json": {"text": "x" * 1001}}, 422, "text"),
        ("POST", "/entries", {"json": {"text": "it is"}}, 422, "statement"),
        ("POST", "/entries", {"json": {"text": "The user likes tea.", "importance": 11}}, 422, "importance"),
        ("POST", "/entries", {"json": {"text": "The user likes tea.", "tenant": "globex"}}, 422, "tenant"),
        ("PUT", "/entries/nope/text", {"json": {"text": "The user likes tea."}}, 404, "no entry"),
        ("PUT", f"/entries/{entry_id}/text", {"json": {"text": "x" * 1001}}, 422, "text"),
        ("PUT", f"/entries/{entry_id}/text", {"json": {"text": "It was great."}}, 422, "statement"),
    ]:
        answer = call(method, path, **kw)
        assert answer.status_code == status and reason in answer.json()["error"], (path, answer.text)
    for method, path, kw in [("DELETE", f"/entries/{entry_id}", {}),  # another tenant's key: not found
                             ("PUT", f"/entries/{entry_id}/text", {"json": {"text": "The user likes tea."}}),
                             ("POST", "/entries", {"json": {"text": "The user likes tea."}})]:
        foreign = call(method, path, key=other_key, **kw)
        assert foreign.status_code == 404, foreign.text
    assert entry_id in {e["id"] for e in call("GET", "/entries").json()["entries"]}  # nothing was deleted
