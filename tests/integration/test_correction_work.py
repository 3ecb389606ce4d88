"""Correction work through a real worker and broker, the openai backend against the test
server, one module-scoped worker:

- keep_new: "loves living in Berlin" is a persona entry; "lives in Lisbon", synthesised on its topic, is
  queued as a correction against its id and decided keep_new (the rules' answer): the Berlin entry is archived
  with its history, the Lisbon reflection opens its version history with the Berlin text and keeps it when
  promoted, visible over /v1 and in the browser, and the served block says Lisbon, not Berlin;
- merge: "loves coffee" then "loves green tea", decided merge by the server (a model's answer the rules never
  give): the coffee entry keeps its id, takes the merged text and keeps the replaced one, no second entry;
- each scope asked the model once, and folding the journal gives the worker's tables: every decision is on
  the record, so a replay applies it without asking again.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaProducer

from credence.config.llm import LLMSettings
from credence.kafka import client_options
from credence.streams.llm.prompts import correction
from credence.streams.llm.rules.correction_work import decide
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.scope.requests import reflection_id
from tests.support.pipeline import (
    DEADLINE_S,
    collect,
    discard,
    flush_and_wait_idle,
    journal_mismatch,
    pipeline_settings,
    scope_views,
    topic_values,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

T0 = datetime(2026, 7, 1, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
KEEP, MERGE = "acme/kira/guide", "acme/milo/guide"
BERLIN, LISBON = "The user loves living in Berlin.", "The user lives in Lisbon."
COFFEE, TEA = "The user loves coffee.", "The user loves green tea."
MERGED = "The user loves coffee and green tea."
SAID = {KEEP: ("I love living in Berlin.", "I live in Lisbon now."), MERGE: ("I love coffee.", "I love green tea.")}
TEXTS = {KEEP: (BERLIN, LISBON), MERGE: (COFFEE, TEA)}


def _answer(inp: correction.Input) -> dict:
    """The rules' decisions, except coffee and green tea, which this model merges."""
    return {"decisions": [{"id": p.id, "action": "merge", "text": MERGED} if "coffee" in p.old else
                          {"id": p.id, "action": decide(p.old, p.new)[0], "text": ""} for p in inp.pairs]}


def part(scope: str) -> dict:
    tenant, user, character = scope.split("/")
    return {"v": 1, "tenant": tenant, "user": user, "character": character}


def turn(scope: str, text: str, at: datetime) -> dict:
    return {**part(scope), "turn_id": f"t-{uuid.uuid4().hex[:8]}", "role": "user", "text": text, "ts": at.isoformat()}


def confirms(scope: str, entry_id: str, at: datetime) -> list[dict]:
    return [{**part(scope), "feedback_id": f"fb-{uuid.uuid4().hex[:8]}", "entry_id": entry_id, "decision": "confirm",
             "ts": (at + i * MIN).isoformat()} for i in (1, 2)]


def produce(settings, name: str, records: list[dict]) -> None:
    async def run():
        producer = AIOKafkaProducer(**client_options(settings.kafka_bootstrap, settings.kafka, acks="all"))
        await producer.start()
        try:
            for r in records:
                scope = f"{r['tenant']}/{r['user']}/{r['character']}"
                await producer.send_and_wait(settings.topic(name), json.dumps(r).encode(), key=scope.encode())
        finally:
            await producer.stop()
    asyncio.run(run())


def persona_saying(worker: WorkerProcess, scope: str, text: str) -> str | None:
    return next((e["id"] for e in worker.get(f"/scope/{scope}")["entries"]
                 if e["snapshot"]["kind"] == "persona" and e["snapshot"]["text"] == text), None)


def say_and_promote(settings, worker, bootstrap: str, index: int, at: datetime) -> None:
    """Each scope says its statement; its reflection is confirmed twice, so merge-on-promote is asked."""
    produce(settings, "turns", [turn(scope, SAID[scope][index], at) for scope in SAID])
    flush_and_wait_idle(worker, bootstrap, settings, list(SAID))
    produce(settings, "feedback", [f for scope in SAID
                                   for f in confirms(scope, reflection_id(scope, TEXTS[scope][index]), at)])


@pytest.fixture(scope="module")
def run(kafka_bootstrap, tmp_path_factory):
    from tests.support.api import add_tenant
    from tests.support.openai_server import OpenAICompatibleServer

    root = tmp_path_factory.mktemp("correction-work")
    with OpenAICompatibleServer(answers={correction.NAME: _answer}) as server:
        llm = LLMSettings(backend="openai", base_url=server.base_url, model=server.model, timeout_s=30)
        settings = pipeline_settings(kafka_bootstrap, root, f"cw{uuid.uuid4().hex[:10]}", llm=llm)
        key = add_tenant(kafka_bootstrap, settings, "acme")
        worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start(ready_timeout_s=120)  # loaded CI
        try:
            say_and_promote(settings, worker, kafka_bootstrap, 0, T0)
            for scope in SAID:  # established: a persona entry each
                wait_until(lambda s=scope: persona_saying(worker, s, TEXTS[s][0]), DEADLINE_S, f"{scope}'s persona")
            say_and_promote(settings, worker, kafka_bootstrap, 1, T0 + timedelta(days=2))
            wait_until(lambda: persona_saying(worker, KEEP, LISBON) and persona_saying(worker, MERGE, MERGED),
                       DEADLINE_S, f"both corrections decided (log: {worker.log_path})")
            status = flush_and_wait_idle(worker, kafka_bootstrap, settings, list(SAID))
            yield settings, worker, key, server, status
        except BaseException:
            print((root / "worker.log").read_text(errors="replace")[-4000:])
            raise
        finally:
            discard(worker)


def detail(worker: WorkerProcess, key: str, scope: str, entry_id: str):
    from tests.support.api import client

    _, user, character = scope.split("/")
    with client(worker, key, "acme") as api:
        return api.entry(user, character, entry_id)


def test_keep_new_archives_the_old_entry_and_the_new_one_shows_its_history(run):
    settings, worker, key, _, _ = run
    lisbon = persona_saying(worker, KEEP, LISBON)
    assert persona_saying(worker, KEEP, BERLIN) is None
    (archived,) = [a for a in topic_values(settings.kafka_bootstrap, settings, "archive")
                   if a["entry"]["text"] == BERLIN]
    # archived, never deleted, naming the statement that replaced it (the reflection, since promoted)
    assert archived["reason"] == f"correction_keep_new:{reflection_id(KEEP, LISBON)}"
    got = detail(worker, key, KEEP, lisbon)
    assert [(v.text, v.reason) for v in got.version_history] == [(BERLIN, "correction_keep_new")]
    assert got.version_history[0].source_fact_id in got.entry.snapshot["source_fact_ids"]
    block = scope_views(worker, [KEEP])[KEEP]["memory_block"]
    assert "Lisbon" in block and "Berlin" not in block


def test_merge_keeps_the_id_and_shows_the_replaced_text(run):
    settings, worker, key, _, _ = run
    coffee = reflection_id(MERGE, COFFEE)
    merged = persona_saying(worker, MERGE, MERGED)
    assert merged == f"persona-{coffee}"  # the coffee entry's id, rewritten in place
    got = detail(worker, key, MERGE, merged)
    assert [(v.text, v.reason) for v in got.version_history] == [(COFFEE, "correction_merge")]
    # decided when green tea was synthesised: no second entry, its facts joined the coffee entry's
    assert reflection_id(MERGE, TEA) not in {e["id"] for e in worker.get(f"/scope/{MERGE}")["entries"]}
    assert len(got.entry.snapshot["source_fact_ids"]) == 2
    assert [a for a in topic_values(settings.kafka_bootstrap, settings, "archive")
            if a["entry"]["text"] == COFFEE] == []


def test_each_correction_asked_once_and_the_journal_replays_to_the_tables(run):
    settings, worker, _, server, status = run
    assert server.outcomes(correction.NAME) == {"ok": 2} and server.violations == []
    journal = topic_values(settings.kafka_bootstrap, settings, "evidence")
    causes = {e["cause"] for e in journal}
    assert {"correction_keep_new", "correction_merge"} <= causes
    assert journal_mismatch(collect(worker, settings.kafka_bootstrap, settings, list(SAID), status)) == {}


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_the_browser_shows_the_earlier_texts(run, tmp_path):
    _, worker, key, _, _ = run
    lisbon = persona_saying(worker, KEEP, LISBON)
    _, user, character = KEEP.split("/")
    url = f"{worker.url}/browser#key={key}&tenant=acme&user={user}&character={character}&entry={lisbon}"
    command = ["chromium", "--headless", "--disable-gpu", "--no-first-run", "--no-sandbox",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=15000", "--dump-dom", url]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=90, check=True).stdout
    assert 'data-versions="1"' in dom and BERLIN in dom and "correction_keep_new" in dom
