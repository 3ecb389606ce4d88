"""Suite-wide fixtures: one real Kafka broker for the session, unique topics per test.

The broker is the project's own embedded one (`credence broker`), unless CREDENCE_KAFKA_BOOTSTRAP
points at an existing cluster. Integration tests are marked `integration`.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# One hypothesis profile for the whole suite: no per-example deadline (a loaded 2-core CI machine is not a
# bug) and derandomized, so a property run explores the same examples every time: the suite stays
# deterministic, and a failure reproduces from the printed example.
hypothesis_settings.register_profile("credence", deadline=None, derandomize=True, print_blob=True)
hypothesis_settings.load_profile("credence")

from credence.config import Settings, load_settings
from credence.streams.ops.broker import EmbeddedBroker, free_port
from tests.support.objectstore import ObjectStore

# Under pytest-xdist: one broker for all workers, a module's tests on one worker (see the module).
pytest_plugins = ["tests.support.parallel"]


def pytest_addoption(parser):
    # Declared here (the suite's root conftest) so the option exists however pytest is invoked.
    parser.addoption("--faults-size", default=None, choices=["tiny", "small", "large"],
                     help="size of the fault suite's runs (default: $CREDENCE_FAULTS_SIZE or small)")


@pytest.fixture(scope="session", autouse=True)
def recall_model_loads_at_first_recall():
    """Test workers load recall's embedding model at their first recall (~10 s of CPU and ~1 GB each),
    not when they start, unless a test's settings ask for the warm-up by name: dozens of workers per run
    would otherwise each load it on 2 cores. WorkerProcess builds every worker's environment here."""
    from credence.streams.ops import worker_process

    product = worker_process.settings_env

    def settings_env(settings: Settings, bootstrap: str) -> dict[str, str]:
        if "recall_warm_up" not in settings.pipeline.model_fields_set:
            settings = settings.model_copy(update={
                "pipeline": settings.pipeline.model_copy(update={"recall_warm_up": False})})
        return product(settings, bootstrap)

    worker_process.settings_env = settings_env
    yield
    worker_process.settings_env = product


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory, pytestconfig) -> str:
    from tests.support.parallel import shared_bootstrap  # imported as a plugin first (assertion rewriting)

    external = os.environ.get("CREDENCE_KAFKA_BOOTSTRAP") or shared_bootstrap(pytestconfig)
    if external:
        yield external
        return
    settings = load_settings()
    broker = EmbeddedBroker(tmp_path_factory.mktemp("kafka"), settings.kafka_version,
                            settings.broker_cache_dir)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def object_store(tmp_path_factory) -> ObjectStore:
    """The project's own S3-compatible server (s3proxy over a folder) for the session."""
    store = ObjectStore(tmp_path_factory.mktemp("s3proxy"))
    store.start()
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def s3_root(object_store: ObjectStore, monkeypatch) -> str:
    """An archive root (s3://bucket/archive) in a bucket no other test shares; the standard AWS variables
    point this process, and every process it starts, at the session's object store."""
    for name, value in object_store.env().items():
        monkeypatch.setenv(name, value)
    return object_store.create_bucket(f"credence-{uuid.uuid4().hex[:12]}") + "/archive"


@pytest.fixture
def topic_prefix() -> str:
    """A topic prefix no other test shares (so tests never see each other's records)."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def settings_factory(tmp_path: Path, topic_prefix: str, kafka_bootstrap: str):
    """Settings for one test: its own topics, consumer group, data dir and web port."""

    def make(**overrides) -> Settings:
        base = dict(
            kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, app_id=f"{topic_prefix}-app",
            data_dir=tmp_path / "data", web_port=free_port(), topic_partitions=4,
            core_config_path=tmp_path / "core_config.json",
        )
        base.update(overrides)
        return load_settings(**base)

    return make
