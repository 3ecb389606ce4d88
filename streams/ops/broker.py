"""The embedded Apache Kafka broker: resolved from Maven Central, run as one KRaft broker+controller.

Used by `credence broker`, the demo and the test suite. A user with their own cluster sets
CREDENCE_KAFKA_BOOTSTRAP and none of this runs.

Resolution writes a tiny pom for the configured Kafka version into the cache and lets the machine's
Maven copy the runtime jars next to it; a marker file makes the second start skip Maven entirely.
Readiness is decided by the broker answering a metadata request, never by sleeping or reading logs.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from credence.errors import BrokerError

log = logging.getLogger(__name__)

# slf4j 1.x binding so the broker's own log lands in a file we can show when it fails to start.
_LOG4J_VERSION = "2.24.3"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>credence.embedded</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

_LOG4J2 = """Configuration:
  status: warn
  Appenders:
    File:
      name: file
      fileName: "{path}"
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: INFO
      AppenderRef:
        - ref: file
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resolve_kafka(version: str, cache_dir: Path) -> Path:
    """Return the folder of runtime jars for Kafka `version`, fetching them with Maven once."""
    libs = cache_dir / version / "libs"
    marker = cache_dir / version / ".complete"
    if marker.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerError(
            "Maven (mvn) is not on PATH, so the embedded Kafka broker cannot be fetched. Install Maven "
            "and Java 17, or point CREDENCE_KAFKA_BOOTSTRAP at an existing Kafka cluster."
        )
    work = cache_dir / version
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(_POM.format(kafka=version, log4j=_LOG4J_VERSION))
    staging = work / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    log.info("resolving Apache Kafka %s from Maven Central into %s", version, libs)
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise BrokerError(f"Maven could not resolve org.apache.kafka:kafka_2.13:{version}:\n{tail}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)  # a half-copied folder is never mistaken for a complete one
    marker.write_text(version)
    return libs


def die_with_parent() -> None:
    # The JVM must not outlive the process that started it (a killed test run, a Ctrl-C'd demo).
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


async def _metadata_ok(bootstrap: str, kafka=None) -> bool:
    from aiokafka.client import AIOKafkaClient

    from credence.kafka import client_options

    client = AIOKafkaClient(**client_options(bootstrap, kafka, request_timeout_ms=2000))
    try:
        await client.bootstrap()  # sends a MetadataRequest and parses the answer
        return bool(client.cluster.brokers())
    except Exception:  # noqa: BLE001 - any failure here just means "not ready yet"
        return False
    finally:
        await client.close()


def wait_for_metadata(bootstrap: str, deadline_s: float, alive=lambda: True, kafka=None) -> None:
    """Block until the broker answers a metadata request, or raise BrokerError at the deadline."""
    end = time.monotonic() + deadline_s
    # Refused connections are the expected answer until the broker listens; keep them out of the log.
    aiokafka_log = logging.getLogger("aiokafka")
    previous = aiokafka_log.level
    aiokafka_log.setLevel(logging.CRITICAL)
    try:
        _poll(bootstrap, end, deadline_s, alive, kafka)
    finally:
        aiokafka_log.setLevel(previous)


def _poll(bootstrap: str, end: float, deadline_s: float, alive, kafka) -> None:
    while time.monotonic() < end:
        if not alive():
            raise BrokerError(f"the Kafka broker at {bootstrap} exited before it became ready")
        if asyncio.run(_metadata_ok(bootstrap, kafka)):
            return
        time.sleep(0.2)  # poll interval between metadata requests, not a wait for readiness
    raise BrokerError(f"no metadata answer from {bootstrap} within {deadline_s:.0f}s")


@dataclass
class BrokerState:
    bootstrap: str
    pid: int
    data_dir: str

    @classmethod
    def read(cls, data_dir: Path) -> "BrokerState | None":
        path = data_dir / "broker.json"
        if not path.exists():
            return None
        try:
            state = cls(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None  # unreadable (e.g. cut short by a crash while written): treat as stale
        try:
            os.kill(state.pid, 0)
        except OSError:
            return None  # stale file from a broker that is gone
        return state


class EmbeddedBroker:
    """One KRaft node (broker+controller) on 127.0.0.1 with a persistent data dir."""

    def __init__(self, data_dir: Path, version: str, cache_dir: Path, port: int = 0,
                 heap: str = "512m"):
        self.data_dir = Path(data_dir).resolve()
        self.version = version
        self.cache_dir = Path(cache_dir).expanduser()
        self.port = port or free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("Java (17+) is not on PATH; the embedded Kafka broker needs it.")
        return java

    def _write_config(self) -> Path:
        logs = self.data_dir / "kraft-logs"
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(logs),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "log.cleaner.backoff.ms": "1000",
        }
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.yaml").write_text(_LOG4J2.format(path=self.log_path))
        return path

    def _classpath(self) -> str:
        libs = resolve_kafka(self.version, self.cache_dir)
        return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))

    def _jvm(self, main: str, *args: str) -> list[str]:
        return [
            self._java(), f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
            "-cp", self._classpath(), main, *args,
        ]

    def _format_once(self, config: Path) -> None:
        if (self.data_dir / "kraft-logs" / "meta.properties").exists():
            return
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=").replace("-", "A")
        proc = subprocess.run(
            self._jvm("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise BrokerError(f"formatting KRaft storage failed:\n{(proc.stdout + proc.stderr)[-2000:]}")

    def start(self, ready_timeout_s: float = 90.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        existing = BrokerState.read(self.data_dir)
        if existing is not None:
            raise BrokerError(
                f"a broker already runs on this data dir (pid {existing.pid}, {existing.bootstrap}); "
                "stop it first or use another --data-dir"
            )
        config = self._write_config()
        self._format_once(config)
        self.proc = subprocess.Popen(
            self._jvm("kafka.Kafka", str(config)),
            stdout=subprocess.DEVNULL, stderr=open(self.data_dir / "jvm.err", "wb"),
            preexec_fn=die_with_parent, start_new_session=True,
        )
        try:
            wait_for_metadata(self.bootstrap, ready_timeout_s, alive=lambda: self.proc.poll() is None)
        except BrokerError as exc:
            self.stop()
            raise BrokerError(f"{exc}; last broker log lines:\n{self._log_tail()}") from None
        state = BrokerState(self.bootstrap, self.proc.pid, str(self.data_dir))
        (self.data_dir / "broker.json").write_text(json.dumps(asdict(state)))
        log.info("Kafka %s ready at %s (data %s)", self.version, self.bootstrap, self.data_dir)
        return self.bootstrap

    def _log_tail(self, n: int = 30) -> str:
        text = ""
        for path in (self.log_path, self.data_dir / "jvm.err"):
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-n:]) + "\n"
        return text

    def stop(self, timeout_s: float = 30.0) -> None:
        (self.data_dir / "broker.json").unlink(missing_ok=True)
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # controlled shutdown: flushes logs, so the next start recovers fast
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("broker did not stop within %.0fs; killing it", timeout_s)
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "EmbeddedBroker":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
