"""A 3-broker KRaft cluster (one controller, three brokers, each its own JVM), topics at RF 3 / min ISR 2,
producers at acks=all. The broker leading the most partitions is SIGKILLed in the middle of the replay and
brought back later; the worker never restarts. The end state equals the one-broker run's, and nothing is
missing from the journal (credence.evidence) or the archive topic.

The brokers' own defaults for new topics are RF 1 / min ISR 1, so the RF 3 / min ISR 2 the test finds on
every input topic and table changelog can only come from credence's settings."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from credence.config import Settings, load_settings
from credence.kafka import client_options
from credence.streams.ops.admin import changelog_topic
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from credence.streams.runtime.topics import STATE_TABLES, TOPICS
from tests.support.cluster import KafkaCluster
from tests.support.pipeline import (
    CLUSTER_LINES,
    FAST_GROUP_ENV,
    collect,
    discard,
    entry_diff,
    entry_digest,
    flush_and_wait_idle,
    fold_archive,
    fold_journal,
    journal_mismatch,
    pipeline_settings,
    produce_lines,
    scopes_of,
    turn_counts,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(600)]

LINES = CLUSTER_LINES
SCOPES = scopes_of(LINES)
# What credence is told to use, and what the brokers would give a topic created without it.
REPLICAS, MIN_INSYNC = 3, 2
BROKER_DEFAULTS = (1, 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    settings = load_settings()
    nodes = KafkaCluster(tmp_path_factory.mktemp("cluster"), settings.kafka_version, settings.broker_cache_dir,
                         brokers=3, heap="384m", min_insync=MIN_INSYNC, topic_defaults=BROKER_DEFAULTS)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()


async def replication(bootstrap: str, settings: Settings) -> dict[str, tuple[list[int], str]]:
    """Every topic of this run's prefix and every table changelog of its app, as the cluster reports them:
    the replica count of each partition and the topic's min.insync.replicas."""
    admin = AIOKafkaAdminClient(**client_options(bootstrap, settings.kafka))
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(f"{settings.topic_prefix}.")
                 or (t.startswith(f"{settings.app_id}-") and t.endswith("-changelog"))]
        replicas = {t["topic"]: sorted(len(p["replicas"]) for p in t["partitions"])
                    for t in await admin.describe_topics(names)}
        asked = [ConfigResource(ConfigResourceType.TOPIC, n, {"min.insync.replicas": None}) for n in names]
        min_isr = {}
        for response in await admin.describe_configs(asked):
            for error, message, _type, name, entries, *_ in response.resources:
                assert error == 0, (name, message)
                min_isr[name] = dict(e[:2] for e in entries)["min.insync.replicas"]
    finally:
        await admin.close()
    return {n: (replicas[n], min_isr[n]) for n in names}


def test_losing_the_busiest_broker_mid_replay_loses_nothing(cluster, reference, tmp_path):
    settings = pipeline_settings(cluster.bootstrap, tmp_path, f"k{uuid.uuid4().hex[:8]}",
                                 topic_replicas=REPLICAS, topic_min_insync_replicas=MIN_INSYNC)
    worker = WorkerProcess(settings, cluster.bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV)
    expected = valid_turn_counts(LINES)
    # Half the input before the kill, the rest after it: the worker is still replaying when the broker
    # dies, whatever the machine's speed. Each part keeps the file's order, so every partition holds its
    # records in the reference run's order, which is what decides the end state.
    before_kill, after_kill = LINES[:len(LINES) // 2], LINES[len(LINES) // 2:]
    try:
        worker.start(ready_timeout_s=180)
        created = asyncio.run(replication(cluster.bootstrap, settings))
        names = [settings.topic(n) for n in TOPICS] + [changelog_topic(settings, t) for t in STATE_TABLES]
        assert created == {n: ([REPLICAS] * settings.topic_partitions, str(MIN_INSYNC)) for n in names}, created
        asyncio.run(produce_lines(cluster.bootstrap, settings, before_kill))
        wait_until(lambda: sum(turn_counts(worker).values()) > 0, 60, "the worker to take in turns")
        leaders = cluster.leaders([settings.topic(n) for n in TOPICS])
        victim = leaders.most_common(1)[0][0]
        assert leaders[victim] > 0, leaders
        cluster.kill(victim)  # SIGKILL: no controlled shutdown, its partitions' leaders move
        taken = sum(turn_counts(worker).values())
        assert taken < sum(expected.values()), f"the replay was over ({taken} turns) before the kill"
        asyncio.run(produce_lines(cluster.bootstrap, settings, after_kill))  # acks=all on the 2 survivors
        wait_turns(worker, expected, 180)
        cluster.restart(victim)  # back later, on its own data dir; it catches up as a follower
        status = flush_and_wait_idle(worker, cluster.bootstrap, settings, SCOPES, 180)
        run = collect(worker, cluster.bootstrap, settings, SCOPES, status)
    except BaseException:
        print((tmp_path / "worker.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        discard(worker)
    assert run.entries and entry_digest(run.entries) == entry_digest(reference.entries), \
        entry_diff(run.entries, reference.entries)
    assert journal_mismatch(run) == {}
    assert entry_digest(fold_journal(run.journal)) == entry_digest(fold_journal(reference.journal))
    assert entry_digest(fold_archive(run.archive)) == entry_digest(fold_archive(reference.archive))
