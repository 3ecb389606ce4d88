"""The embedded S3-compatible server: s3proxy (a Java server on Maven Central) on a filesystem backend.

Used by the test suite the way it uses the embedded Kafka broker, and by anyone who wants to try the
archive on object storage without a cloud account. Its jars are resolved from Maven Central once into a
cache (node.resolve_jars), then one JVM serves 127.0.0.1:PORT with AWS v2/v4 signatures over a folder.
Readiness is decided by the server answering an HTTP request, never by sleeping or reading logs.
"""

from __future__ import annotations

import http.client
import logging
import secrets
import subprocess
import sys
import time
from pathlib import Path

from credence.errors import CredenceError
from credence.streams.ops.node import die_with_parent, free_port, log_tail, resolve_jars, stop_process

log = logging.getLogger(__name__)


class ObjectStoreError(CredenceError):
    """The embedded S3-compatible server (s3proxy) could not be resolved or started."""


S3PROXY_VERSION = "2.6.0"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "credence" / "s3proxy"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>credence.embedded</groupId><artifactId>s3proxy-runtime</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.gaul</groupId><artifactId>s3proxy</artifactId><version>{version}</version></dependency>
  </dependencies>
</project>
"""

# s3proxy logs every request at DEBUG by default; warnings go to a file shown when it fails to start.
_LOGBACK = """<configuration>
  <appender name="file" class="ch.qos.logback.core.FileAppender">
    <file>{path}</file>
    <encoder><pattern>[%d] %level %logger: %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="file"/></root>
</configuration>
"""

# The AWS SDK (pyarrow's S3 client included) adds CRC checksums to uploads by default since 2025;
# s3proxy 2.6.0 rejects those uploads (XAmzContentSHA256Mismatch), so clients send them only when required.
CHECKSUM_ENV = {"AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
                "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}


def resolve_s3proxy(version: str = S3PROXY_VERSION, cache_dir: Path = DEFAULT_CACHE_DIR) -> Path:
    """The folder of s3proxy's runtime jars, fetched with Maven once."""
    return resolve_jars(Path(cache_dir).expanduser() / version, _POM.format(version=version),
                        f"org.gaul:s3proxy:{version}", ObjectStoreError,
                        "Maven (mvn) is not on PATH, so the embedded S3 server (s3proxy) cannot be fetched. "
                        "Install Maven and Java 17, or point AWS_ENDPOINT_URL at an S3 service.")


class ObjectStore:
    """One s3proxy JVM on 127.0.0.1 storing buckets as folders under ``data_dir/blobs``."""

    def __init__(self, data_dir: Path, version: str = S3PROXY_VERSION, cache_dir: Path = DEFAULT_CACHE_DIR,
                 port: int = 0, access_key: str = "credence", secret_key: str | None = None,
                 region: str = "us-east-1"):
        self.data_dir = Path(data_dir).resolve()
        self.version, self.cache_dir = version, Path(cache_dir).expanduser()
        self.port = port or free_port()
        self.access_key, self.secret_key = access_key, secret_key or secrets.token_hex(16)
        self.region = region
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "s3proxy.log"

    def env(self) -> dict[str, str]:
        """The standard AWS variables a client needs to reach this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region, **CHECKSUM_ENV}

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name`` through the S3 API; return it as an s3:// URL."""
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(access_key=self.access_key, secret_key=self.secret_key, region=self.region,
                               endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                               allow_bucket_creation=True)
        try:
            fs.create_dir(name)
        except OSError as exc:
            raise ObjectStoreError(f"cannot create bucket {name!r} on {self.endpoint}: {exc}") from exc
        return f"s3://{name}"

    def start(self, ready_timeout_s: float = 60.0) -> str:
        libs = resolve_s3proxy(self.version, self.cache_dir)
        (self.data_dir / "blobs").mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "s3proxy.conf"
        conf.write_text(
            f"s3proxy.endpoint={self.endpoint}\ns3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={self.access_key}\ns3proxy.credential={self.secret_key}\n"
            f"jclouds.provider=filesystem\njclouds.filesystem.basedir={self.data_dir / 'blobs'}\n"
        )
        (self.data_dir / "logback.xml").write_text(_LOGBACK.format(path=self.log_path))
        java = ["java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dlogback.configurationFile={self.data_dir / 'logback.xml'}",
                "-cp", f"{libs}/*", "org.gaul.s3proxy.Main", "--properties", str(conf)]
        try:
            self.proc = subprocess.Popen(java, stdout=subprocess.DEVNULL,
                                         stderr=open(self.data_dir / "jvm.err", "wb"),
                                         preexec_fn=die_with_parent, start_new_session=True)
        except FileNotFoundError as exc:
            raise ObjectStoreError("Java (17+) is not on PATH; the embedded S3 server needs it.") from exc
        self._wait_ready(ready_timeout_s)
        log.info("s3proxy %s ready at %s (data %s)", self.version, self.endpoint, self.data_dir)
        return self.endpoint

    def _wait_ready(self, deadline_s: float) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise ObjectStoreError(f"s3proxy exited with code {self.proc.returncode} before it became ready:\n"
                                       f"{self.log_tail()}")
            if self._answers():
                return
            time.sleep(0.2)  # poll interval between HTTP probes, not a wait for readiness
        self.stop()
        raise ObjectStoreError(f"s3proxy gave no HTTP answer at {self.endpoint} within {deadline_s:.0f}s:\n"
                               f"{self.log_tail()}")

    def _answers(self) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            connection.request("GET", "/")
            return connection.getresponse().status > 0  # an unsigned request is refused: still an answer
        except OSError:
            return False
        finally:
            connection.close()

    def log_tail(self, n: int = 30) -> str:
        return log_tail((self.log_path, self.data_dir / "jvm.err"), n)

    def stop(self, timeout_s: float = 15.0) -> None:
        stop_process(self.proc, timeout_s, "s3proxy")

    def __enter__(self) -> ObjectStore:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.support.objectstore DIR BUCKET`: serve DIR over S3 until Ctrl-C, with BUCKET
    created, and print the variables a client needs (for trying the archive on object storage locally)."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python -m tests.support.objectstore",
                                     description="Run the embedded S3-compatible server (s3proxy) over a folder.")
    parser.add_argument("data_dir")
    parser.add_argument("bucket")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    store = ObjectStore(Path(args.data_dir), port=args.port)

    def interrupt(*_) -> None:
        raise KeyboardInterrupt  # stop in the main flow: Popen.wait is not re-entrant from a handler

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also when started in the background (SIGINT ignored there)
    try:
        return _serve(store, args.bucket)
    except ObjectStoreError as exc:
        print(f"credence: error: {exc}", file=sys.stderr)
        return 2


def _serve(store: ObjectStore, bucket: str) -> int:
    with store:
        url = store.create_bucket(bucket)
        print(f"s3proxy {store.version} serving {url} at {store.endpoint}; Ctrl-C stops it", flush=True)
        for name, value in store.env().items():
            print(f"export {name}={value}", flush=True)
        try:
            store.proc.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
