"""A replicated Kafka cluster on one machine: one KRaft controller and N brokers, each its own JVM and
data dir under one root. For the fault tests, and for anyone who wants to try credence on a real
cluster (RF 3, min.insync.replicas 2) without one:

    python -m tests.support.cluster /tmp/kafka-cluster 3

Each JVM gets a small heap (CREDENCE_BROKER_HEAP-like `heap`, default 384m): four JVMs fit in ~2 GB.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

from credence.errors import BrokerError
from credence.streams.ops.node import FAST_KRAFT, KafkaNode, free_port, new_cluster_id, wait_for_metadata


class _Controller(KafkaNode):
    def __init__(self, data_dir: Path, version: str, cache_dir: Path, heap: str, node_id: int, port: int):
        super().__init__(data_dir, version, cache_dir, heap)
        self.node_id, self.port = node_id, port

    def properties(self) -> dict[str, str]:
        return FAST_KRAFT | {
            "process.roles": "controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.port}",
            "listeners": f"CONTROLLER://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        }


class _Broker(KafkaNode):
    def __init__(self, data_dir: Path, version: str, cache_dir: Path, heap: str, node_id: int,
                 controller: _Controller, replicas: int, min_insync: int, topic_defaults: tuple[int, int]):
        super().__init__(data_dir, version, cache_dir, heap)
        self.node_id, self.port, self.controller = node_id, free_port(), controller
        self.replicas, self.min_insync = replicas, min_insync
        self.topic_defaults = topic_defaults

    def properties(self) -> dict[str, str]:
        c = self.controller
        return FAST_KRAFT | {
            "process.roles": "broker",
            "node.id": str(self.node_id),
            "controller.quorum.voters": f"{c.node_id}@127.0.0.1:{c.port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "default.replication.factor": str(self.topic_defaults[0]),
            "min.insync.replicas": str(self.topic_defaults[1]),
            "offsets.topic.replication.factor": str(self.replicas),
            "transaction.state.log.replication.factor": str(self.replicas),
            "transaction.state.log.min.isr": str(self.min_insync),
            "share.coordinator.state.topic.replication.factor": str(self.replicas),
            "share.coordinator.state.topic.min.isr": str(self.min_insync),
            "unclean.leader.election.enable": "false",
        }


class KafkaCluster:
    """One controller (node id 0) and brokers 1..N on 127.0.0.1, all formatted with one cluster id."""

    def __init__(self, root: Path, version: str, cache_dir: Path, brokers: int = 3, heap: str = "384m",
                 min_insync: int = 2, topic_defaults: tuple[int, int] | None = None):
        """`topic_defaults` (replicas, min.insync.replicas) is what the brokers give a topic created without
        its own: by default the cluster's replication. A test that must tell credence's topic settings from
        the brokers' defaults sets them apart. The internal topics keep the cluster's replication factor
        either way (the offsets topic has no min.insync.replicas of its own, so it takes the default's)."""
        if brokers < 1 or min_insync > brokers:
            raise BrokerError(f"a cluster of {brokers} brokers cannot keep min.insync.replicas={min_insync}")
        self.root = Path(root).resolve()
        replicas = min(3, brokers)
        min_insync = min(min_insync, replicas)
        defaults = topic_defaults or (replicas, min_insync)
        if not 1 <= defaults[1] <= defaults[0] <= brokers:
            raise BrokerError(f"topic defaults {defaults} do not fit a cluster of {brokers} brokers")
        self.controller = _Controller(self.root / "controller", version, cache_dir, heap, 0, free_port())
        self.brokers = {i: _Broker(self.root / f"broker-{i}", version, cache_dir, heap, i, self.controller,
                                   replicas, min_insync, defaults) for i in range(1, brokers + 1)}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    def _nodes(self) -> list[KafkaNode]:
        return [self.controller, *self.brokers.values()]

    def start(self, ready_timeout_s: float = 180.0) -> str:
        cluster_id = new_cluster_id()
        for node in self._nodes():
            node.data_dir.mkdir(parents=True, exist_ok=True)
            node._write_config()  # noqa: SLF001 - the cluster is the node's owner
            node.format_once(cluster_id)
        for node in self._nodes():
            node.launch()
        try:
            self.wait_brokers(len(self.brokers), ready_timeout_s)
        except BrokerError:
            tails = "\n".join(f"--- {n.data_dir.name}\n{n.log_tail(10)}" for n in self._nodes())
            self.stop()
            raise BrokerError(f"the cluster did not come up within {ready_timeout_s:.0f}s:\n{tails}") from None
        return self.bootstrap

    def wait_brokers(self, count: int, deadline_s: float) -> None:
        """Block until `count` brokers are registered and unfenced (metadata lists them)."""
        end = time.monotonic() + deadline_s
        for broker in self.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                wait_for_metadata(f"127.0.0.1:{broker.port}", max(1.0, end - time.monotonic()))
        while time.monotonic() < end:
            if len(asyncio.run(self._metadata()).brokers()) >= count:
                return
            time.sleep(0.2)  # metadata poll interval
        raise BrokerError(f"fewer than {count} brokers registered within {deadline_s:.0f}s")

    async def _metadata(self):
        from aiokafka.client import AIOKafkaClient

        from credence.kafka import client_options

        live = ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values() if b.proc and b.proc.poll() is None)
        client = AIOKafkaClient(**client_options(live, request_timeout_ms=5000))
        try:
            await client.bootstrap()
            return await client.fetch_all_metadata()
        finally:
            await client.close()

    def leaders(self, topics: list[str]) -> Counter:
        """How many partitions of `topics` each broker leads."""
        metadata = asyncio.run(self._metadata())
        counts: Counter = Counter()
        for topic in topics:
            for partition in metadata.partitions_for_topic(topic) or ():
                counts[metadata.leader_for_partition(_tp(topic, partition))] += 1
        return counts

    def kill(self, node_id: int) -> None:
        self.brokers[node_id].kill()

    def restart(self, node_id: int, ready_timeout_s: float = 120.0) -> None:
        self.brokers[node_id].launch()
        self.wait_brokers(len(self.brokers), ready_timeout_s)

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.stop()
        self.controller.stop()

    def __enter__(self) -> KafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _tp(topic: str, partition: int):
    from aiokafka.structs import TopicPartition

    return TopicPartition(topic, partition)


def main(argv: list[str]) -> int:
    from credence.config import load_settings

    root, brokers = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 3
    settings = load_settings()
    cluster = KafkaCluster(root, settings.kafka_version, settings.broker_cache_dir, brokers)
    print(f"export CREDENCE_KAFKA_BOOTSTRAP={cluster.start()} CREDENCE_TOPIC_REPLICAS={min(3, brokers)} "
          f"CREDENCE_TOPIC_MIN_INSYNC_REPLICAS={min(2, brokers)}", flush=True)
    try:
        while all(n.proc.poll() is None for n in cluster._nodes()):  # noqa: SLF001
            time.sleep(1.0)  # foreground until Ctrl-C or a node dies
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
