"""The embedded Apache Kafka broker: one KRaft broker+controller (see node.py for the JVM itself).

Used by `credence broker`, the demo and the test suite. A user with their own cluster sets
CREDENCE_KAFKA_BOOTSTRAP and none of this runs. broker.json in the data dir records the running broker;
it is trusted only when its pid is still a Kafka JVM on that data dir whose owner is alive, so a
broker killed with SIGKILL restarts on its data dir without manual cleanup.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from credence.errors import BrokerError
from credence.streams.ops.node import (  # noqa: F401 - re-exported: the broker's public helpers
    FAST_KRAFT,
    KafkaNode,
    die_with_parent,
    free_port,
    new_cluster_id,
    resolve_kafka,
    wait_for_metadata,
)

log = logging.getLogger(__name__)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """A running process (a zombie left by a killed parent is not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def is_broker_of(pid: int, data_dir: Path) -> bool:
    """Whether `pid` is a live Kafka JVM started on `data_dir` (not a reused pid, not a zombie)."""
    args = _cmdline(pid)
    return _alive(pid) and "kafka.Kafka" in args and str(Path(data_dir) / "server.properties") in args


@dataclass
class BrokerState:
    """broker.json: where the broker listens, its JVM pid and the pid of the process that started it."""

    bootstrap: str
    pid: int
    data_dir: str
    owner: int = 0

    @classmethod
    def load(cls, data_dir: Path) -> BrokerState | None:
        try:
            return cls(**json.loads((Path(data_dir) / "broker.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None  # missing, or cut short by a crash while written: nothing to trust

    @classmethod
    def read(cls, data_dir: Path) -> BrokerState | None:
        """The broker running on `data_dir`, or None when the file is stale (its JVM is gone, or the pid
        now names another process, or the process that owned the broker was killed)."""
        state = cls.load(data_dir)
        if state is None or not is_broker_of(state.pid, Path(data_dir).resolve()):
            return None
        if state.owner and not _alive(state.owner):
            return None  # an orphan JVM on its way out (its owner's death sent it SIGTERM)
        return state

    def write(self) -> None:
        (Path(self.data_dir) / "broker.json").write_text(json.dumps(asdict(self)))


@dataclass(frozen=True)
class SecureListeners:
    """Extra listeners for the embedded broker beside its internal PLAINTEXT one: SASL_SSL (SCRAM-SHA-256,
    SCRAM-SHA-512 and PLAIN for `users`, created at format time) and SSL requiring a client certificate
    signed by `ca_file` (mutual TLS). The PEM files are the broker's certificate chain and PKCS#8 key."""

    ca_file: Path
    cert_file: Path
    key_file: Path
    users: tuple[tuple[str, str], ...] = ()

    def properties(self, names: list[str]) -> dict[str, str]:
        keystore = Path(self.key_file).read_text() + Path(self.cert_file).read_text()
        pem = Path(self.cert_file).with_name("broker-keystore.pem")
        pem.write_text(keystore)  # Kafka's PEM keystore file holds the key and the chain together
        props = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"}
        for name in names:
            prefix = f"listener.name.{name.lower()}."
            props |= {prefix + "ssl.keystore.type": "PEM", prefix + "ssl.keystore.location": str(pem),
                      prefix + "ssl.truststore.type": "PEM", prefix + "ssl.truststore.location": str(self.ca_file)}
        plain = " ".join(f'user_{user}="{password}"' for user, password in self.users)
        props |= {
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};",
            "listener.name.ssl.ssl.client.auth": "required",
        }
        return props

    def scram_args(self) -> list[str]:
        out = []
        for user, password in self.users:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                out += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return out


def _reclaim(data_dir: Path, wait_s: float = 10.0) -> None:
    """Refuse if a live broker owns `data_dir`; otherwise clear what a killed one left behind (its
    broker.json, and its JVM if the owner was killed and the JVM is still shutting down)."""
    state = BrokerState.load(data_dir)
    if state is None:
        return
    if BrokerState.read(data_dir) is not None:
        raise BrokerError(
            f"a broker already runs on this data dir (pid {state.pid}, {state.bootstrap}); "
            "stop it first or use another --data-dir"
        )
    if is_broker_of(state.pid, data_dir):  # orphaned by a killed owner: let it finish, then make sure
        end = time.monotonic() + wait_s
        while is_broker_of(state.pid, data_dir) and time.monotonic() < end:
            time.sleep(0.1)  # poll interval while the orphan's controlled shutdown runs
        if is_broker_of(state.pid, data_dir):
            os.kill(state.pid, signal.SIGKILL)
        while is_broker_of(state.pid, data_dir):
            time.sleep(0.05)
    (data_dir / "broker.json").unlink(missing_ok=True)


def _port(wanted: int, recorded: int | None) -> int:
    """`wanted` if given; else the port used last time on this data dir when it is free (a restarted
    broker keeps its address, so running clients reconnect by themselves); else a free one."""
    if wanted:
        return wanted
    if recorded:
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", recorded))
            return recorded
        except OSError:
            pass
    return free_port()


class EmbeddedBroker(KafkaNode):
    """One KRaft node (broker+controller): a PLAINTEXT listener, and with `secure` also SASL_SSL and
    mutual-TLS listeners (used by the tests to run the pipeline on a secured cluster)."""

    def __init__(self, data_dir: Path, version: str, cache_dir: Path, port: int = 0, heap: str = "512m",
                 secure: SecureListeners | None = None):
        super().__init__(data_dir, version, cache_dir, heap)
        self.secure = secure
        recorded = {}
        try:
            recorded = json.loads((self.data_dir / "ports.json").read_text())
        except (OSError, ValueError):
            pass
        self.port = _port(port, recorded.get("port"))
        self.controller_port = _port(0, recorded.get("controller_port"))
        self.sasl_port = _port(0, recorded.get("sasl_port")) if secure else 0
        self.ssl_port = _port(0, recorded.get("ssl_port")) if secure else 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def properties(self) -> dict[str, str]:
        listeners = {"PLAINTEXT": self.port}
        if self.secure:
            listeners |= {"SASL_SSL": self.sasl_port, "SSL": self.ssl_port}
        public = ",".join(f"{name}://127.0.0.1:{port}" for name, port in listeners.items())
        props = FAST_KRAFT | {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"{public},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": public,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": ",".join(f"{n}:{n}" for n in listeners) + ",CONTROLLER:PLAINTEXT",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
        }
        if self.secure:
            props |= self.secure.properties(["SASL_SSL", "SSL"])
        return props

    def start(self, ready_timeout_s: float = 90.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        _reclaim(self.data_dir)
        ports = {"port": self.port, "controller_port": self.controller_port}
        if self.secure:
            ports |= {"sasl_port": self.sasl_port, "ssl_port": self.ssl_port}
        (self.data_dir / "ports.json").write_text(json.dumps(ports))
        self._write_config()
        self.format_once(new_cluster_id(), self.secure.scram_args() if self.secure else [])
        self.launch()
        try:
            wait_for_metadata(self.bootstrap, ready_timeout_s, alive=lambda: self.proc.poll() is None)
        except BrokerError as exc:
            self.stop()
            raise BrokerError(f"{exc}; last broker log lines:\n{self.log_tail()}") from None
        BrokerState(self.bootstrap, self.proc.pid, str(self.data_dir), os.getpid()).write()
        log.info("Kafka %s ready at %s (data %s)", self.version, self.bootstrap, self.data_dir)
        return self.bootstrap

    def stop(self, timeout_s: float = 30.0) -> None:
        (self.data_dir / "broker.json").unlink(missing_ok=True)
        super().stop(timeout_s)

    def kill(self) -> None:
        (self.data_dir / "broker.json").unlink(missing_ok=True)
        super().kill()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def configured_or_embedded(settings, data_dir: Path) -> Iterator[str]:
    """The configured Kafka's bootstrap, or that of an embedded broker started in `data_dir` and stopped
    after the block: for a run that brings its own broker when none is configured (the demo, benchmarks)."""
    if settings.kafka_bootstrap:
        yield settings.kafka_bootstrap
        return
    with EmbeddedBroker(data_dir, settings.kafka_version, settings.broker_cache_dir) as broker:
        yield broker.bootstrap
