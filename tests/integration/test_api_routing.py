"""Two workers in one group: a read reaching the worker that does not own the scope is answered with the
owner's data, and a POST (feedback, with its body) is carried to the owner too."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from credence.streams.ops.broker import free_port
from credence.streams.ops.replay import send_control
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.tables.entries import Entry
from credence.tables.rendering import render_memory_block
from credence.tables.scope import Scope
from tests.support.api import add_tenant, client
from tests.support.pipeline import discard, pipeline_settings, start_together

pytestmark = pytest.mark.integration

USERS = [f"u{i}" for i in range(8)]
TEXTS = ["I love green tea.", "I am learning Rust.", "My cat is named Miso.", "I live in Lisbon."]


def turns(user: str) -> list[dict]:
    return [{"user": user, "character": "barista", "turn_id": f"{user}-{i}", "role": "user", "text": text,
             "ts": f"2026-05-0{i + 1}T10:00:00Z"} for i, text in enumerate(TEXTS)]


def held(worker: WorkerProcess) -> dict[str, dict]:
    return worker.get("/scopes")["scopes"]


def test_reads_and_feedback_reach_the_scopes_owner(kafka_bootstrap, tmp_path):
    settings = pipeline_settings(kafka_bootstrap, tmp_path, f"rt{uuid.uuid4().hex[:8]}", topic_partitions=4)
    key = add_tenant(kafka_bootstrap, settings, "acme")
    second = settings.model_copy(update={"web_port": free_port(), "data_dir": tmp_path / "data2"})
    workers = start_together([WorkerProcess(settings, kafka_bootstrap, tmp_path / "w1.log"),
                              WorkerProcess(second, kafka_bootstrap, tmp_path / "w2.log")])
    scopes = [f"acme/{u}/barista" for u in USERS]
    try:
        with client(workers[0], key, "acme") as api:
            assert api.send_turns([t for u in USERS for t in turns(u)]).accepted == len(USERS) * len(TEXTS)

        def split():  # every scope held by exactly one worker, and each worker holds some
            a, b = (set(held(w)) for w in workers)
            return a and b and not a & b and a | b == set(scopes) and all(
                held(w)[s]["turns"] == len(TEXTS) for w in workers for s in held(w))

        wait_until(split, 120, "the scopes to be split between the two workers")
        asyncio.run(send_control(kafka_bootstrap, settings, scopes, "flush"))
        wait_until(lambda: all(v["idle"] and v["entries"] for w in workers for v in held(w).values()), 90,
                   "every scope to have entries and be idle")
        owner = {s: w for w in workers for s in held(w)}
        for scope in scopes:
            _, user, character = scope.split("/")
            view = owner[scope].get(f"/scope/{scope}")
            entries = [Entry.from_dict(e["snapshot"]) for e in view["entries"]]
            expected = render_memory_block(Scope.parse(scope), entries, entries[0].updated_at and
                                           _clock(view), settings=settings.memory).text
            for worker in workers:
                with client(worker, key, "acme") as api:
                    assert api.prompt(user, character).text == expected == view["memory_block"], (scope, worker.url)
                    assert [e.id for e in api.entries(user, character).entries] == [e.id for e in entries]
        # A feedback POST sent to the worker that does not own the scope is applied by the owner.
        scope = next(s for s in scopes if owner[s] is workers[1])
        _, user, character = scope.split("/")
        with client(workers[0], key, "acme") as api:
            target = api.entries(user, character).entries[0]
            result = api.feedback(user, character, target.id, "confirm", wait=True)
            assert result.applied is True and result.entry.version > target.version
            assert api.entry(user, character, target.id).entry.version == result.entry.version
    finally:
        for worker in workers:
            discard(worker)


def _clock(view: dict):
    from credence.tables.clock import parse_instant

    return parse_instant(view["clock"])
