"""The web port's door, on a real worker and broker: no route gives a tenant's memory to a request without
that tenant's key, none answers a foreign Host or Origin, and recall answers while its model loads.

Every route of the port is called without a key, with another tenant's key, and with the right key from
a foreign Origin or Host; nothing of the tenant (its name, its users, its entries' texts) may come back.
The worker's embedding model is held back by a gate (a `sitecustomize` in its environment stands in for
a model load that takes 16 s on a loaded host) until the test opens it.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest

from credence.streams.api.routes import ROUTES
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.api import add_tenant
from tests.support.pipeline import (
    discard,
    flush_and_wait_idle,
    pipeline_settings,
    produce_lines,
    sample_lines,
    scopes_of,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SCOPES = ["acme/alice/barista", "globex/carol/coach"]
ACME = "acme/alice/barista"
FOREIGN_ORIGIN = "http://rebound.example"
FOREIGN_HOST = "rebound.example:6066"

# The embedding model's load, held until the gate file exists; then a small deterministic encoder
# (hashed words, unit length) stands in for all-MiniLM-L6-v2 so the test never loads torch.
GATED_MODEL = '''
import os, time, zlib
gate = os.environ.get("CREDENCE_TEST_MODEL_GATE")
if gate:
    import numpy as np
    import credence.streams.llm.embeddings as embeddings

    def load_encoder(model_path=""):
        while not os.path.exists(gate):
            time.sleep(0.05)

        def encode(texts):
            out = np.zeros((len(texts), 64), dtype=np.float32)
            for row, text in enumerate(texts):
                for word in text.lower().split():
                    out[row, zlib.crc32(word.encode()) % 64] += 1.0
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            return out / np.where(norms == 0, 1.0, norms)
        return encode

    embeddings.load_encoder = load_encoder
'''


@pytest.fixture(scope="module")
def door(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("door")
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(GATED_MODEL)
    gate = root / "model-gate"
    settings = pipeline_settings(kafka_bootstrap, root, f"door{uuid.uuid4().hex[:8]}")
    keys = {name: add_tenant(kafka_bootstrap, settings, name) for name in ("acme", "globex")}
    lines = sample_lines(SCOPES)
    asyncio.run(produce_lines(kafka_bootstrap, settings, lines))
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log",
                           extra_env={"PYTHONPATH": str(root / "site"), "CREDENCE_TEST_MODEL_GATE": str(gate)})
    worker.start()
    try:
        wait_turns(worker, valid_turn_counts(lines))
        flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes_of(lines))
        texts = [e["text"] for e in worker.get(f"/scope/{ACME}")["entries"]]
        assert texts, "the sample should leave acme/alice/barista with entries"
        yield worker, keys, gate, texts
    finally:
        gate.touch()
        discard(worker)


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def port_routes() -> list[tuple[str, str, dict | None]]:
    """(method, path, JSON body) of every route on the port, /v1 on acme's scope and an entry of it."""
    values = {"tenant": "acme", "user": "alice", "character": "barista", "entry_id": "e1", "turn_id": "t1"}
    bodies = {"post_turns": {"turns": []}, "post_recall": {"query": "tea"},
              "post_feedback": {"entry_id": "e1", "kind": "confirm"}, "post_restore": {"by": "door"},
              "post_nominate": {"by": "door"}, "put_consensus": {"score": 0.5, "by": "door"},
              "put_card": {"entries": []}}
    routes = [(r.method, r.path.format(**values), bodies.get(r.name)) for r in ROUTES]
    return routes + [("GET", "/scopes", None), ("GET", f"/scope/{ACME}", None), ("GET", "/status", None),
                     ("GET", "/metrics", None), ("GET", "/browser", None), ("GET", "/browser/browser.js", None),
                     ("GET", "/", None), ("GET", "/table/", None), ("GET", "/router/", None),
                     ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})]


def call(worker, method, path, body, headers) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", **headers}
    return httpx.request(method, worker.url + path, headers=headers, timeout=30.0,
                         content=None if body is None else json.dumps(body))


def leaks(response: httpx.Response, texts: list[str]) -> list[str]:
    """What of acme's memory a response carries."""
    body = response.text
    names = [n for n in ("acme", "alice", "barista") if n in body]
    return names + [t for t in texts if t in body]


def test_no_route_gives_a_tenants_memory_without_its_key(door):
    worker, keys, _, texts = door
    for method, path, body in port_routes():
        for who, headers in (("no key", {}), ("globex's key", bearer(keys["globex"])),
                             ("a wrong key", bearer("cred_not-a-key"))):
            response = call(worker, method, path, body, {"Content-Type": "application/json", **headers})
            assert not leaks(response, texts), f"{method} {path} with {who}: {response.status_code} " \
                                                f"{response.text[:300]}"
            # Another tenant's key is refused on acme's paths; /scopes and /mcp answer it for its own tenant.
            if path.startswith(("/v1/tenants", "/scope/")) or (who != "globex's key" and path in ("/scopes", "/mcp")):
                assert response.status_code in (401, 404), (method, path, who, response.status_code)


def test_a_foreign_origin_or_host_is_refused_on_every_route(door):
    worker, keys, _, texts = door
    for method, path, body in port_routes():
        for header, status in (({"Origin": FOREIGN_ORIGIN}, 403), ({"Host": FOREIGN_HOST}, 421),
                               ({"Origin": "null"}, 403)):
            response = call(worker, method, path, body,
                            {"Content-Type": "application/json", **bearer(keys["acme"]), **header})
            assert response.status_code == status, (method, path, header, response.status_code, response.text[:200])
            assert not leaks(response, texts) and response.json()["error"], (method, path, header)
    # The same requests from the worker's own names pass the door.
    for origin in (worker.url, "http://localhost:3000"):
        response = call(worker, "GET", f"/scope/{ACME}", None, {**bearer(keys["acme"]), "Origin": origin})
        assert response.status_code == 200, response.text


def test_scope_views_answer_a_key_with_its_own_tenant_only(door):
    worker, keys, _, texts = door
    listing = call(worker, "GET", "/scopes", None, bearer(keys["acme"]))
    assert listing.status_code == 200 and set(listing.json()["scopes"]) == {ACME}
    assert set(call(worker, "GET", "/scopes", None, bearer(keys["globex"])).json()["scopes"]) == {
        "globex/carol/coach"}
    own = call(worker, "GET", f"/scope/{ACME}", None, bearer(keys["acme"]))
    assert own.status_code == 200 and [e["text"] for e in own.json()["entries"]] == texts
    other = call(worker, "GET", f"/scope/{ACME}", None, bearer(keys["globex"]))
    unknown = call(worker, "GET", "/scope/nosuch/alice/barista", None, bearer(keys["globex"]))
    assert (other.status_code, other.json()) == (unknown.status_code, unknown.json()) == (
        404, {"error": "not found", "status": 404})
    assert set(worker.get("/scopes")["scopes"]) == set(SCOPES)  # the operator's key reads every tenant


def test_status_and_metrics_name_no_tenant(door):
    worker, _, _, texts = door
    status = httpx.get(worker.url + "/status", timeout=10.0)
    assert status.status_code == 200 and not leaks(status, texts) and "globex" not in status.text
    assert isinstance(status.json()["state"]["unreadable_scopes"], int)
    assert "unreadable_scope_names" not in status.json()["state"]
    assert worker.get("/status")["state"]["unreadable_scope_names"] == []  # the operator may ask
    metrics = httpx.get(worker.url + "/metrics", timeout=10.0)
    assert metrics.status_code == 200 and "credence_turns_total" in metrics.text
    assert not leaks(metrics, texts) and "globex" not in metrics.text and 'tenant="' not in metrics.text


def test_recall_answers_by_bm25_while_the_model_loads_then_by_both(door):
    worker, keys, gate, _ = door
    assert not gate.exists()
    url = f"{worker.url}/v1/tenants/acme/users/alice/characters/barista/recall"
    first = httpx.post(url, json={"query": "tea"}, headers=bearer(keys["acme"]), timeout=30.0)
    assert first.status_code == 200, first.text
    assert first.json()["rankers"] == ["bm25"]
    assert all(set(hit["rankers"]) <= {"bm25"} for hit in first.json()["hits"])
    assert worker.get("/status")["embeddings"]["model_loaded"] is False
    gate.touch()

    def with_cosine():
        answer = httpx.post(url, json={"query": "tea"}, headers=bearer(keys["acme"]), timeout=30.0).json()
        return answer if answer["rankers"] == ["bm25", "cosine"] else None

    answer = wait_until(with_cosine, 60, "recall to rank by cosine once the model has loaded")
    assert any("cosine" in hit["rankers"] for hit in answer["hits"])
    assert worker.get("/status")["embeddings"]["model_loaded"] is True
