"""Corrections in conversation through a real worker and broker, one module-scoped worker:

- a rebuttal of a persona entry the AI mentioned beside a surfaced reflection: the target check runs (it
  used to run only when nothing was surfaced) and disputes the persona entry, and the surfaced reflection
  the user did not speak about is not denied; the served block shows the entry as disputed;
- a forget request: the reflection it names is denied at once, journalled with the request's turn as the
  cause, and leaves the served block; what it does not name stays;
- a replay of both: the worker's store deleted and restored from the changelogs ends in the same state,
  and nothing is decided again (no new journal event).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from credence.kafka import client_options
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.scope.requests import reflection_id
from credence.tables.rendering import DISPUTED_HEADING
from tests.support.pipeline import (
    DEADLINE_S,
    FAST_GROUP_ENV,
    discard,
    flush_and_wait_idle,
    pipeline_settings,
    scope_views,
    topic_values,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

T0 = datetime(2026, 7, 1, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
REBUT, FORGET = "acme/rita/guide", "acme/finn/guide"
NURSE = reflection_id(REBUT, "The user works as a nurse at the city hospital.")
HIKING = reflection_id(REBUT, "The user loves hiking.")
REX = reflection_id(FORGET, "The user has a dog named Rex.")
TEA = reflection_id(FORGET, "The user loves tea.")


def part(scope: str) -> dict:
    tenant, user, character = scope.split("/")
    return {"v": 1, "tenant": tenant, "user": user, "character": character}


def turn(scope: str, text: str, at: datetime, role: str = "user", surfaced: list[str] | None = None,
         turn_id: str | None = None) -> dict:
    return {**part(scope), "turn_id": turn_id or f"t-{uuid.uuid4().hex[:8]}", "role": role, "text": text,
            "ts": at.isoformat(), **({"surfaced_ids": surfaced} if surfaced else {})}


def confirm(scope: str, entry_id: str, at: datetime) -> dict:
    return {**part(scope), "feedback_id": f"fb-{uuid.uuid4().hex[:8]}", "entry_id": entry_id, "decision": "confirm",
            "ts": at.isoformat()}


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


def entry(worker: WorkerProcess, scope: str, entry_id: str) -> dict | None:
    found = [e for e in worker.get(f"/scope/{scope}")["entries"] if e["id"] == entry_id]
    return found[0]["snapshot"] if found else None


@pytest.fixture(scope="module")
def run(kafka_bootstrap, tmp_path_factory):
    """Both scopes established (the nurse observation confirmed into a persona entry), then corrected."""
    root = tmp_path_factory.mktemp("corrections")
    settings = pipeline_settings(kafka_bootstrap, root, f"c{uuid.uuid4().hex[:10]}")
    # SIGKILLed by a test below: its restart waits out the dead member's session, the shortest the broker allows.
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log", extra_env=FAST_GROUP_ENV).start()
    scopes = [REBUT, FORGET]
    try:
        produce(settings, "turns", [turn(REBUT, "I work as a nurse at the city hospital.", T0),
                                    turn(REBUT, "I love hiking.", T0 + MIN),
                                    turn(FORGET, "I have a dog named Rex.", T0), turn(FORGET, "I love tea.", T0 + MIN)])
        flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes)
        produce(settings, "feedback", [confirm(REBUT, NURSE, T0 + 2 * MIN), confirm(REBUT, NURSE, T0 + 3 * MIN)])
        persona = wait_until(lambda: next((e["id"] for e in worker.get(f"/scope/{REBUT}")["entries"]
                                           if e["snapshot"]["kind"] == "persona"), None), DEADLINE_S, "the persona entry")
        later = T0 + timedelta(days=2)
        produce(settings, "turns", [
            turn(REBUT, "Still hiking on weekends? And how is the hospital?", later, "ai", [HIKING, persona]),
            turn(REBUT, "No, that's wrong. I don't work as a nurse anymore, I quit.", later + MIN, turn_id="t-rebut"),
            turn(FORGET, "Good evening!", later, "ai"),
            turn(FORGET, "Please forget what I told you about my dog Rex.", later + MIN, turn_id="t-forget")])
        flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes)
        yield settings, worker, persona
    except BaseException:
        print((root / "worker.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        discard(worker)


def test_a_rebuttal_beside_a_surfaced_reflection_disputes_the_persona_entry_it_names(run):
    settings, worker, persona = run
    hiking = entry(worker, REBUT, HIKING)
    assert hiking["status"] == "pending" and hiking["evidence"]["disputation"] == 0
    journal = [e for e in topic_values(settings.kafka_bootstrap, settings, "evidence") if e["entry_id"] == persona]
    assert "negative_keyword" in [e["cause"] for e in journal if e["event"] == "signal"]  # the target check ran
    current, _, disputed = scope_views(worker, [REBUT])[REBUT]["memory_block"].partition(DISPUTED_HEADING)
    assert "nurse" not in current and "nurse" in disputed and "hiking" in current


def test_a_forget_request_denies_what_it_names_and_journals_the_request(run):
    settings, worker, _ = run
    assert entry(worker, FORGET, REX)["status"] == "denied"
    journal = [e for e in topic_values(settings.kafka_bootstrap, settings, "evidence") if e["entry_id"] == REX]
    assert [(e["cause"], e["to_status"]) for e in journal if e["event"] == "signal"] == [
        ("forget_request:t-forget", "denied")]
    block = scope_views(worker, [FORGET])[FORGET]["memory_block"]
    assert "Rex" not in block and "loves tea" in block


def test_a_store_restored_from_the_changelogs_ends_in_the_same_state_without_deciding_again(run):
    settings, worker, _ = run
    before = scope_views(worker, [REBUT, FORGET])
    journal = len(topic_values(settings.kafka_bootstrap, settings, "evidence"))
    worker.kill()  # a crash, too: everything it decided was committed with its state
    shutil.rmtree(Path(settings.data_dir) / "worker")
    worker.start(ready_timeout_s=120)  # the fixture stops it
    assert scope_views(worker, [REBUT, FORGET]) == before
    assert len(topic_values(settings.kafka_bootstrap, settings, "evidence")) == journal
