"""The hostile corpus through the HTTP API /v1: every bad request gets its 4xx with a reason (never a
5xx, never a traceback in the worker's log), a turns batch mixing good and hostile turns accepts exactly
the good ones and rejects every bad one by index with its reason, and the good ones end in the same
state as a clean run of them."""

from __future__ import annotations

import json
import re
import uuid

import httpx
import pytest

from credence.streams.ops.worker_process import WorkerProcess
from tests.faults.hostile import http_requests, turn_batch
from tests.support.api import add_tenant
from tests.support.pipeline import discard, flush_and_wait_idle, pipeline_settings, turn_counts

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
CASES = http_requests()


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-api")
    settings = pipeline_settings(kafka_bootstrap, root, f"h{uuid.uuid4().hex[:8]}")
    keys = {name: add_tenant(kafka_bootstrap, settings, name) for name in ("acme", "globex")}
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start(ready_timeout_s=120)
    try:
        yield worker, settings, keys
    finally:
        discard(worker)


def call(worker, keys, case) -> httpx.Response:
    auth = {"own": f"Bearer {keys['acme']}", "bogus": "Bearer not-a-key", "none": None}[case["auth"]]
    headers = {"Content-Type": "application/json"} | ({"Authorization": auth} if auth else {})
    return httpx.request(case["method"], worker.url + case["path"], content=case["body"], headers=headers,
                         timeout=30.0)


@pytest.mark.parametrize("case", CASES, ids=[c["kind"] for c in CASES])
def test_every_hostile_request_gets_its_4xx_with_a_reason(served, case):
    worker, _, keys = served
    response = call(worker, keys, case)
    expect = case["expect"] if isinstance(case["expect"], tuple) else (case["expect"],)
    assert response.status_code in expect, (case["kind"], response.status_code, response.text[:500])
    assert response.text.strip(), "refused without a reason"
    if case.get("reason"):
        assert re.search(case["reason"], response.text), (case["kind"], response.text[:500])


def test_a_mixed_turn_batch_takes_the_good_and_names_every_bad(served, kafka_bootstrap):
    worker, settings, keys = served
    bodies, expected, good = turn_batch()
    body = json.dumps({"turns": bodies}).encode()  # ASCII escapes: a lone surrogate travels as "\ud800"
    response = httpx.post(f"{worker.url}/v1/tenants/acme/turns", content=body, timeout=60.0,
                          headers={"Authorization": f"Bearer {keys['acme']}", "Content-Type": "application/json"})
    assert response.status_code == 202, response.text[:1000]
    answer = response.json()
    assert answer["accepted"] == len(good)
    rejected = {r["index"]: r["reason"] for r in answer["rejected"]}
    assert sorted(rejected) == [i for i, _ in expected]
    for index, pattern in expected:
        assert re.search(pattern, rejected[index]), (index, bodies[index], rejected[index])
    from credence.streams.ops.worker_process import wait_until

    wait_until(lambda: turn_counts(worker).get("acme/hapi/barista") == len(good), 120, "the good turns")
    flush_and_wait_idle(worker, kafka_bootstrap, settings, ["acme/hapi/barista"])
    # aiohttp logs "Error handling request" for any exception a handler let escape (a 500)
    assert "Error handling request" not in worker.log_path.read_text(errors="replace")
