"""A 3-broker KRaft cluster (one controller, three brokers, each its own JVM), topics at RF 3 / min ISR 2,
producers at acks=all. The broker leading the most partitions is SIGKILLed in the middle of the replay and
brought back later; the worker never restarts. The end state equals the one-broker run's, and nothing is
missing from the journal (credence.evidence) or the archive topic."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from credence.config import load_settings
from credence.streams.ops.cluster import KafkaCluster
from credence.streams.ops.process import WorkerProcess
from credence.streams.runtime.topics import TOPICS
from tests.support.pipeline import (
    CLUSTER_LINES, FAST_GROUP_ENV, collect, entry_digest, flush_and_wait_idle, fold_archive, fold_journal,
    journal_mismatch, pipeline_settings, produce_lines, scopes_of, valid_turn_counts, wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(600)]

LINES = CLUSTER_LINES
SCOPES = scopes_of(LINES)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    settings = load_settings()
    nodes = KafkaCluster(tmp_path_factory.mktemp("cluster"), settings.kafka_version, settings.broker_cache_dir,
                         brokers=3, heap="384m", min_insync=2)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()


def test_losing_the_busiest_broker_mid_replay_loses_nothing(cluster, reference, tmp_path):
    settings = pipeline_settings(cluster.bootstrap, tmp_path, f"k{uuid.uuid4().hex[:8]}",
                                 topic_replicas=3, topic_min_insync_replicas=2)
    worker = WorkerProcess(settings, cluster.bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV)
    third = len(LINES) // 3
    try:
        worker.start(ready_timeout_s=180)
        asyncio.run(produce_lines(cluster.bootstrap, settings, LINES[:third]))
        leaders = cluster.leaders([settings.topic(n) for n in TOPICS])
        victim = leaders.most_common(1)[0][0]
        assert leaders[victim] > 0, leaders
        cluster.kill(victim)  # SIGKILL: no controlled shutdown, its partitions' leaders move
        asyncio.run(produce_lines(cluster.bootstrap, settings, LINES[third:2 * third]))
        wait_turns(worker, valid_turn_counts(LINES[:2 * third]), 180)
        cluster.restart(victim)  # back later, on its own data dir; it catches up as a follower
        asyncio.run(produce_lines(cluster.bootstrap, settings, LINES[2 * third:]))
        wait_turns(worker, valid_turn_counts(LINES), 180)
        status = flush_and_wait_idle(worker, cluster.bootstrap, settings, SCOPES, 180)
        run = collect(worker, cluster.bootstrap, settings, SCOPES, status)
    except BaseException:
        print((tmp_path / "worker.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        worker.stop()
    assert run.entries and entry_digest(run.entries) == entry_digest(reference.entries)
    assert journal_mismatch(run) == {}
    assert entry_digest(fold_journal(run.journal)) == entry_digest(fold_journal(reference.journal))
    assert entry_digest(fold_archive(run.archive)) == entry_digest(fold_archive(reference.archive))
