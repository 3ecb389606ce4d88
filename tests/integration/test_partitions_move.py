"""Two workers in one group: when partitions move, each worker's busy scopes, ticks and the scan for
unfinished work follow the partitions it holds now."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.partitioner import DefaultPartitioner

from credence.config.llm import LLMSettings
from credence.config.pipeline import PipelineSettings
from credence.streams.llm.prompts import stage1_extraction
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.broker import free_port
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.pipeline import FAST_GROUP_ENV, discard, produce_lines

pytestmark = pytest.mark.integration
PARTITIONS = 4
SCOPES = [f"acme/u{i}/aria" for i in range(12)]


def partition_of(scope: str) -> int:
    parts = list(range(PARTITIONS))
    return DefaultPartitioner()(scope.encode(), parts, parts)


def lines() -> list[bytes]:
    """Two user turns per scope: each scope sends a Stage-1 request the test server holds, so it stays
    busy (a request in flight) until the test releases the answers."""
    import json

    out = []
    for i in range(2):
        for scope in SCOPES:
            tenant, user, character = scope.split("/")
            out.append(json.dumps({"v": 1, "tenant": tenant, "user": user, "character": character,
                                   "turn_id": f"{user}-{i}", "role": "user", "text": "I love green tea.",
                                   "ts": f"2026-05-01T10:0{i}:00Z"}).encode())
    return out


def state(worker: WorkerProcess) -> dict:
    status = worker.get("/status")
    return {"held": set(status["state"]["held_partitions"]), "busy": status["busy_scopes"],
            "ready": status["ready"]}


@pytest.fixture
def held_llm():
    """Stage-1 answers wait until released: scopes stay busy however long the rebalances take."""
    with OpenAICompatibleServer(delay_tasks=[stage1_extraction.NAME], delay_timeout_s=240) as server:
        yield server
        server.release_delayed()


def test_busy_scopes_follow_the_partitions_each_worker_holds(settings_factory, kafka_bootstrap, tmp_path, held_llm):
    llm = LLMSettings(backend="openai", base_url=held_llm.base_url, model=held_llm.model, timeout_s=300,
                      max_retries=0)
    # a window closes on each scope's second user turn: its Stage-1 request is what the server holds
    settings = settings_factory(topic_partitions=PARTITIONS, llm=llm, pipeline=PipelineSettings(
        ticks_advance_clock=False, tick_interval_seconds=1.0, stage1_max_batch=2))
    asyncio.run(ensure_topics(kafka_bootstrap, settings, changelogs=True))
    first = WorkerProcess(settings, kafka_bootstrap, tmp_path / "first.log", extra_env=FAST_GROUP_ENV).start()
    second = None
    try:
        asyncio.run(produce_lines(kafka_bootstrap, settings, lines()))
        wait_until(lambda: state(first)["busy"] == len(SCOPES), 90, "every scope to be busy on the first worker")
        assert state(first)["held"] == set(range(PARTITIONS))

        other = settings.model_copy(update={"web_port": free_port(), "data_dir": tmp_path / "data-2"})
        second = WorkerProcess(other, kafka_bootstrap, tmp_path / "second.log", extra_env=FAST_GROUP_ENV).start(
            ready_timeout_s=120)

        def split():
            a, b = state(first), state(second)
            if not (a["ready"] and b["ready"] and a["held"] and b["held"]
                    and a["held"] | b["held"] == set(range(PARTITIONS)) and not a["held"] & b["held"]):
                return None
            want_a = sum(1 for s in SCOPES if partition_of(s) in a["held"])
            return (a, b) if a["busy"] == want_a and b["busy"] == len(SCOPES) - want_a else None

        a, b = wait_until(split, 120, "the busy scopes to follow the partitions to both workers")
        assert 0 < a["busy"] < len(SCOPES)  # the scopes really were split between the workers

        second.stop()  # its partitions come back to the first worker, which scans them again
        wait_until(lambda: (s := state(first))["held"] == set(range(PARTITIONS)) and s["busy"] == len(SCOPES),
                   120, "the first worker to hold every partition and every busy scope again")
        held_llm.release_delayed()  # the answers arrive: every scope ends idle on the one worker left
        wait_until(lambda: state(first)["busy"] == 0, 120, "every scope to go idle once Stage 1 answers")
    finally:
        if second is not None:
            discard(second)
        discard(first)
