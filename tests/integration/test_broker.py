"""The embedded broker and the admin calls against it, plus the command line's help texts."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from credence.errors import BrokerError
from credence.kafka import client_options
from credence.streams.ops import node as node_module
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.broker import (
    BrokerState,
    EmbeddedBroker,
    configured_or_embedded,
    die_with_parent,
    free_port,
    wait_for_metadata,
)
from credence.streams.runtime.topics import TOPICS
from credence.streams.state.fence import TRANSACTION_LOG, warm_transactions

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


async def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    admin = AIOKafkaAdminClient(**client_options(bootstrap))
    await admin.start()
    try:
        return {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics(topics)}
    finally:
        await admin.close()


def test_the_broker_answers_metadata(kafka_bootstrap, monkeypatch):
    # The readiness check itself returns at the first metadata answer, not at its deadline: a condition
    # (the answers it saw), not a wall-clock bound a loaded host could break.
    answers: list[bool] = []
    asked = node_module._metadata_ok

    async def recorded(*args, **kwargs) -> bool:
        answers.append(await asked(*args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(node_module, "_metadata_ok", recorded)
    wait_for_metadata(kafka_bootstrap, 120.0)
    assert answers and answers[-1] is True and not any(answers[:-1]), answers


def test_nothing_listening_is_a_broker_error_at_the_deadline():
    with pytest.raises(BrokerError, match="no metadata answer"):
        wait_for_metadata(f"127.0.0.1:{free_port()}", 1.0)


def test_topics_get_the_configured_partitions(settings_factory, kafka_bootstrap):
    settings = settings_factory(topic_partitions=3)
    asyncio.run(ensure_topics(kafka_bootstrap, settings))
    asyncio.run(ensure_topics(kafka_bootstrap, settings))  # idempotent
    names = [settings.topic(n) for n in TOPICS]
    assert asyncio.run(partition_counts(kafka_bootstrap, names)) == {n: 3 for n in names}


def test_a_topic_with_other_partitions_is_refused(settings_factory, kafka_bootstrap):
    asyncio.run(ensure_topics(kafka_bootstrap, settings_factory(topic_partitions=4)))
    with pytest.raises(BrokerError, match=r"has 4 partitions but credence is configured for 2 .*CREDENCE_TOPIC_PARTITIONS"):
        asyncio.run(ensure_topics(kafka_bootstrap, settings_factory(topic_partitions=2)))


async def _produce_one(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"kept across restarts", key=b"k")
    finally:
        await producer.stop()


async def _read_one(bootstrap: str, topic: str) -> bytes:
    consumer = AIOKafkaConsumer(**client_options(bootstrap, auto_offset_reset="earliest"))
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        record = await asyncio.wait_for(consumer.getone(), 30)
        return record.value
    finally:
        await consumer.stop()


def test_a_second_start_reuses_storage_and_cache(tmp_path, settings_factory, kafka_bootstrap, monkeypatch):
    settings = settings_factory(topic_partitions=1)
    data_dir = tmp_path / "broker"
    first = EmbeddedBroker(data_dir, settings.kafka_version, settings.broker_cache_dir)
    with first:
        asyncio.run(ensure_topics(first.bootstrap, settings))
        asyncio.run(_produce_one(first.bootstrap, settings.topic("turns")))
        with pytest.raises(BrokerError, match="already runs on this data dir"):
            EmbeddedBroker(data_dir, settings.kafka_version, settings.broker_cache_dir).start()
    meta = (data_dir / "kraft-logs" / "meta.properties").read_text()
    assert (settings.broker_cache_dir / settings.kafka_version / ".complete").exists()

    def no_subprocess(*args, **kwargs):  # neither Maven nor the storage formatter may run again
        raise AssertionError(f"unexpected subprocess.run({args[0][:3]}...) on a warm start")

    monkeypatch.setattr(node_module.subprocess, "run", no_subprocess)
    monkeypatch.setattr(node_module.shutil, "which",
                        lambda name, _which=node_module.shutil.which: None if name == "mvn" else _which(name))
    second = EmbeddedBroker(data_dir, settings.kafka_version, settings.broker_cache_dir)
    with second:
        assert asyncio.run(_read_one(second.bootstrap, settings.topic("turns"))) == b"kept across restarts"
    assert (data_dir / "kraft-logs" / "meta.properties").read_text() == meta  # same cluster id: no re-format
    assert not (data_dir / "broker.json").exists()


def test_a_stale_broker_file_naming_another_live_process_is_ignored(tmp_path, settings_factory):
    """A pid in broker.json that now names some other process (here: this test run) is not a broker."""
    settings = settings_factory(topic_partitions=1)
    data_dir = tmp_path / "broker"
    data_dir.mkdir()
    BrokerState("127.0.0.1:1", os.getpid(), str(data_dir.resolve()), 0).write()
    assert BrokerState.read(data_dir) is None
    with EmbeddedBroker(data_dir, settings.kafka_version, settings.broker_cache_dir) as broker:
        assert BrokerState.read(data_dir).pid == broker.proc.pid


def test_a_new_cluster_creates_its_transaction_log_when_a_worker_starts_not_in_the_restore(tmp_path,
                                                                                            settings_factory):
    """A broker that never ran a transaction creates its log at the first InitProducerId, and the changelog
    writers' start waited for it inside Faust's bounded (15 s) restore step: at 256 partitions on a fresh
    broker the worker halted (exit 70). The worker's start asks for it first (`run_worker`)."""
    settings = settings_factory(topic_partitions=1)
    with EmbeddedBroker(tmp_path / "broker", settings.kafka_version, settings.broker_cache_dir) as broker:
        assert TRANSACTION_LOG not in asyncio.run(ensure_topics(broker.bootstrap, settings))
        asyncio.run(warm_transactions(settings, broker.bootstrap))
        assert TRANSACTION_LOG in asyncio.run(ensure_topics(broker.bootstrap, settings))


def test_configured_kafka_or_an_embedded_broker_for_the_block(tmp_path, settings_factory, kafka_bootstrap):
    settings = settings_factory(topic_partitions=1)
    with configured_or_embedded(settings.model_copy(update={"kafka_bootstrap": kafka_bootstrap}),
                                tmp_path / "unused") as bootstrap:
        assert bootstrap == kafka_bootstrap
    assert not (tmp_path / "unused").exists()  # nothing started
    with configured_or_embedded(settings.model_copy(update={"kafka_bootstrap": ""}), tmp_path / "broker") as bootstrap:
        wait_for_metadata(bootstrap, 10.0)
        pid = BrokerState.read(tmp_path / "broker").pid
    assert BrokerState.read(tmp_path / "broker") is None  # stopped after the block
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_credence_broker_restarts_on_its_data_dir_after_sigkill(tmp_path):
    """SIGKILL of `credence broker` and of its JVM, then the same command again: it starts (no manual
    cleanup), keeps its port, keeps the data; and it still refuses a second live broker on that dir."""
    data_dir = tmp_path / "broker"

    def start() -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen([sys.executable, "-m", "credence.streams.ops.cli", "broker", "--data-dir", str(data_dir)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=die_with_parent)
        for line in proc.stdout:
            if line.startswith("export CREDENCE_KAFKA_BOOTSTRAP="):
                return proc, line.strip().split("=", 1)[1]
        raise AssertionError(f"credence broker exited with {proc.wait()}")

    first, bootstrap = start()
    try:
        second = run_cli("broker", "--data-dir", str(data_dir))
        assert second.returncode == 2 and "already runs on this data dir" in second.stderr
        jvm = BrokerState.read(data_dir).pid
        os.kill(first.pid, signal.SIGKILL)
        os.kill(jvm, signal.SIGKILL)
        first.wait()
        again, bootstrap_again = start()
    finally:
        first.kill()
    try:
        assert bootstrap_again == bootstrap  # clients that knew the old address reconnect by themselves
        assert BrokerState.read(data_dir).pid != jvm
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(60) == 0
    assert BrokerState.read(data_dir) is None


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command, words", [
    ((), ["broker", "worker", "replay", "demo", "CREDENCE_"]),
    (("broker",), ["KRaft", "--data-dir", "--port", "Maven"]),
    (("worker",), ["usage: credence worker"]),
    (("worker",), ["CREDENCE_KAFKA_BOOTSTRAP", "CREDENCE_LLM__BACKEND"]),
    (("sink",), ["--drain", "Parquet"]),
    (("forget",), ["tenant", "user", "--archive-only"]),
    (("replay",), ["file", "--bootstrap", "JSON-lines"]),
    (("demo",), ["--input", "--timeout", "offline"]),
])
def test_cli_help_exits_zero_with_useful_text(command, words, capsys):
    # In this process (a fresh interpreter per help text cost ~1.5 s): argparse prints the help and exits 0
    # through SystemExit, which is all `python -m credence.streams.ops.cli --help` does (the last test
    # below runs the command itself).
    from credence.streams.ops.cli import main

    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0, out
    for word in words:
        assert word in out, (command, word, out)


def test_cli_without_a_command_is_a_usage_error():
    result = run_cli()
    assert result.returncode == 2 and "COMMAND" in result.stderr


def test_the_command_prints_its_help_and_exits_zero():
    result = run_cli("--help")
    assert result.returncode == 0 and "usage: credence" in result.stdout, result.stderr


def test_send_now_sends_what_the_producer_holds_without_waiting_for_its_linger(kafka_bootstrap, topic_prefix):
    """`send_now` (credence/kafka.py) reaches into aiokafka: the records queued before it go out at once,
    together. With a 120 s linger, only it can deliver them within the 60 s deadline."""
    from types import SimpleNamespace

    from aiokafka.admin import NewTopic

    from credence.kafka import send_now

    topic = f"{topic_prefix}.send-now"

    async def run() -> list:
        admin = AIOKafkaAdminClient(**client_options(kafka_bootstrap))
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 1, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(**client_options(kafka_bootstrap, acks="all", linger_ms=120_000))
        await producer.start()
        try:
            futures = [await producer.send(topic, b"v%d" % i, key=b"k") for i in range(3)]
            send_now(SimpleNamespace(producer=SimpleNamespace(_producer=producer)))
            return await asyncio.wait_for(asyncio.gather(*futures), 60)
        finally:
            await producer.stop()

    metas = asyncio.run(run())
    assert [m.offset for m in metas] == [0, 1, 2]
    send_now(SimpleNamespace(producer=SimpleNamespace(_producer=None)))  # not started: nothing to do


def test_llm_results_go_to_their_scopes_partition_through_their_own_producer(kafka_bootstrap, topic_prefix):
    """The runner's ResultSender: each result acknowledged on return, on the partition the scope's inputs
    are on (Faust's producer hashes keys with the same default partitioner), keyed and encoded as the agent
    decodes them; stopping it closes its producer, and a later result starts a new one."""
    from credence.config import load_settings
    from credence.streams.llm.runner import ResultSender
    from credence.streams.runtime.agent import encode_record
    from credence.streams.state.ownership import Ownership

    settings = load_settings(kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, topic_partitions=4)
    ownership = Ownership(4, settings.topic("turns"))
    scopes = [f"acme/u{i}/aria" for i in range(24)]

    async def run() -> list:
        await ensure_topics(kafka_bootstrap, settings)
        sender = ResultSender(settings, kafka_bootstrap, ownership.partition_of, encode_record)
        for i, scope in enumerate(scopes):
            await sender("control", scope, {"type": "result", "request_id": f"r{i}"})
            if i == 11:
                await sender.stop()  # the worker stopping; results after it start a new producer
        await sender.stop()
        consumer = AIOKafkaConsumer(settings.topic("control"), **client_options(kafka_bootstrap,
                                    auto_offset_reset="earliest", enable_auto_commit=False))
        await consumer.start()
        try:
            got: list = []
            deadline = time.monotonic() + 60
            while len(got) < len(scopes) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += records
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert len(got) == len(scopes)
    for record in got:
        scope = record.key.decode()
        assert record.partition == ownership.partition_of(scope)
        assert orjson.loads(record.value)["request_id"] == f"r{scopes.index(scope)}"
    assert len({r.partition for r in got}) > 1  # the scopes spread: the partition is not a constant
