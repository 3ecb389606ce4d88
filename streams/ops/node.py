"""One Kafka JVM on this machine: the runtime jars (resolved from Maven Central once), its config,
storage format, start and stop. streams/ops/broker.py builds the single embedded broker from it and
tests/support/cluster.py (a test rig) a controller with N brokers.

Resolution writes a tiny pom for the configured Kafka version into the cache and lets the machine's
Maven copy the runtime jars next to it; a marker file makes the second start skip Maven entirely.
Readiness is decided by the broker answering a metadata request, never by sleeping or reading logs.
"""

from __future__ import annotations

import asyncio
import base64
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
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
    pom = _POM.format(kafka=version, log4j=_LOG4J_VERSION)
    return resolve_jars(cache_dir / version, pom, f"org.apache.kafka:kafka_2.13:{version}", BrokerError,
                        "Maven (mvn) is not on PATH, so the embedded Kafka broker cannot be fetched. Install Maven "
                        "and Java 17, or point CREDENCE_KAFKA_BOOTSTRAP at an existing Kafka cluster.")


def resolve_jars(work: Path, pom: str, what: str, error: type[Exception], no_maven: str) -> Path:
    """Return ``work``/libs, the runtime jars of ``pom``'s dependencies, copied there by Maven once
    (``what`` names them in messages; ``error`` is raised with ``no_maven`` when mvn is missing)."""
    libs = work / "libs"
    marker = work / ".complete"
    if marker.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(no_maven)
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(pom)
    staging = work / "libs.partial"
    shutil.rmtree(staging, ignore_errors=True)
    log.info("resolving %s from Maven Central into %s", what, libs)
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise error(f"Maven could not resolve {what}:\n{tail}")
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)  # a half-copied folder is never mistaken for a complete one
    marker.write_text(what)
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


# KRaft timings for a broker on one machine: a restarted node re-registers as soon as the controller
# fences its previous incarnation (broker.session.timeout.ms), so keep that session short.
FAST_KRAFT = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "2000",
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.cleaner.backoff.ms": "1000",
    "num.partitions": "1",
    "offsets.topic.num.partitions": "4",
}


def log_tail(paths, n: int = 30) -> str:
    """The last `n` lines of each of `paths` that exists: what a JVM service said before it failed."""
    text = ""
    for path in paths:
        if path.exists():
            text += "\n".join(path.read_text(errors="replace").splitlines()[-n:]) + "\n"
    return text


def stop_process(proc, timeout_s: float, what: str) -> None:
    """SIGTERM (a controlled shutdown), then SIGKILL if `proc` has not exited within `timeout_s`."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("%s did not stop within %.0fs; killing it", what, timeout_s)
        proc.kill()
        proc.wait()


class KafkaNode:
    """One Kafka JVM (broker, controller or both) on 127.0.0.1 with a persistent data dir."""

    def __init__(self, data_dir: Path, version: str, cache_dir: Path, heap: str = "512m"):
        self.data_dir = Path(data_dir).resolve()
        self.version = version
        self.cache_dir = Path(cache_dir).expanduser()
        self.heap = heap
        self.proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    def properties(self) -> dict[str, str]:
        raise NotImplementedError

    def _java(self) -> str:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("Java (17+) is not on PATH; the embedded Kafka broker needs it.")
        return java

    def _classpath(self) -> str:
        libs = resolve_kafka(self.version, self.cache_dir)
        return os.pathsep.join(str(p) for p in sorted(libs.glob("*.jar")))

    def _jvm(self, main: str, *args: str) -> list[str]:
        # C1 only: a test broker is short-lived and CPU-starved, so start-up beats peak throughput.
        return [
            self._java(), f"-Xmx{self.heap}", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.yaml'}",
            "-cp", self._classpath(), main, *args,
        ]

    def _write_config(self) -> Path:
        props = self.properties() | {"log.dirs": str(self.data_dir / "kraft-logs")}
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.data_dir / "log4j2.yaml").write_text(_LOG4J2.format(path=self.log_path))
        return self.config_path

    def format_once(self, cluster_id: str, extra: list[str] = ()) -> None:
        if (self.data_dir / "kraft-logs" / "meta.properties").exists():
            return
        proc = subprocess.run(
            self._jvm("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_path), *extra),
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise BrokerError(f"formatting KRaft storage failed:\n{(proc.stdout + proc.stderr)[-2000:]}")

    def launch(self) -> None:
        self.proc = subprocess.Popen(
            self._jvm("kafka.Kafka", str(self.config_path)),
            stdout=subprocess.DEVNULL, stderr=open(self.data_dir / "jvm.err", "wb"),
            preexec_fn=die_with_parent, start_new_session=True,
        )

    def log_tail(self, n: int = 30) -> str:
        return log_tail((self.log_path, self.data_dir / "jvm.err"), n)

    def kill(self) -> None:
        """SIGKILL: no controlled shutdown, the crash the fault tests need."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout_s: float = 30.0) -> None:
        stop_process(self.proc, timeout_s, "Kafka node")  # controlled: flushes logs, the next start recovers fast


def new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=").replace("-", "A")


