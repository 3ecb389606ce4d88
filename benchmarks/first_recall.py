"""The first recall after a worker starts, while recall's embedding model is still loading.

    CREDENCE_KAFKA_BOOTSTRAP=host:port python benchmarks/first_recall.py

Starts a worker (the `embeddings` extra installed: recall's cosine model loads in a thread at start) on
one scope of the sample, and times the first POST …/recall once the worker says it is ready, then how
long after ready the answers' `rankers` include cosine. Recall answers by BM25 while the model loads
(streams/serving/recall.py, `cosine_ready`), so the first answer need not wait for it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.api import add_tenant
from tests.support.pipeline import pipeline_settings, produce_lines, sample_lines

SCOPE = "acme/alice/barista"


def main() -> int:
    bootstrap = os.environ.get("CREDENCE_KAFKA_BOOTSTRAP")
    if not bootstrap:
        print("set CREDENCE_KAFKA_BOOTSTRAP=host:port (a running broker)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="first-recall-"))
    settings = pipeline_settings(bootstrap, root, f"first{uuid.uuid4().hex[:8]}")
    key = add_tenant(bootstrap, settings, "acme")
    asyncio.run(produce_lines(bootstrap, settings, sample_lines([SCOPE])))
    worker = WorkerProcess(settings, bootstrap, root / "worker.log")
    started = time.perf_counter()
    worker.start()
    ready = time.perf_counter()
    url = f"{worker.url}/v1/tenants/acme/users/alice/characters/barista/recall"
    auth = {"Authorization": f"Bearer {key}"}
    try:
        wait_until(lambda: worker.get("/scopes")["scopes"], 60, "the scope")
        before = time.perf_counter()
        first = httpx.post(url, json={"query": "tea"}, headers=auth, timeout=300)
        took = time.perf_counter() - before
        print(f"ready {ready - started:.1f} s after start; first recall {first.status_code} in {took:.3f} s, "
              f"rankers {first.json().get('rankers')}")

        def cosine() -> bool:
            return httpx.post(url, json={"query": "tea"}, headers=auth, timeout=300).json()["rankers"] == [
                "bm25", "cosine"]

        wait_until(cosine, 600, "recall to rank by cosine")
        print(f"cosine ranks {time.perf_counter() - ready:.1f} s after ready")
    finally:
        worker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
