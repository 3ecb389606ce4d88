"""The suite under pytest-xdist (`-n N --dist loadscope`, as .ci/run runs it): one broker for all workers,
and a test module's tests kept on one worker.

The controller starts the embedded broker once, in a thread, while the workers start and collect; each
worker's `kafka_bootstrap` waits for it (each test already makes its own topics, as with an external
cluster). A module's tests share module-scoped fixtures (a started worker process, an app, a browser), so
they run on one worker (`--dist loadscope` made per module, and SHARED_RUNS' modules as one unit: the
scheduler sees node ids only, so the grouping is by path).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

_DIR_KEY = "credence_shared_broker_dir"

# Modules compared against one session-scoped reference run (tests/cluster/conftest.py's `reference`,
# tests/faults/conftest.py's `restart_reference`): one worker runs them all, so the run is made once, and
# the cluster tests, which start clusters of their own, run one at a time. A module missing here is still
# correct, only slower: its worker makes the run again.
SHARED_RUNS = {
    "tests/cluster/": "reference",
    "tests/faults/test_broker_restart.py": "restart_reference",
    "tests/faults/test_scale_out.py": "restart_reference",
    # The bundled embedding model, loaded in the test process (load_encoder keeps it per process): ~20 s
    # of CPU per load on the 2-core CI, once for both modules when one worker runs them.
    "tests/unit/llm/test_embeddings.py": "bundled_model",
    "tests/unit/serving/test_recall_cosine.py": "bundled_model",
}


# The longest modules, longest first (pytest --durations on a 2-core machine): a worker takes them before
# anything else, so none starts near the end and keeps the run waiting on it alone. Only wall time depends
# on this list.
SLOW_FIRST = (
    "tests/integration/test_handoff_crash.py", "tests/faults/test_kills.py", "tests/faults/test_zombie_owner.py",
    "tests/cluster/", "tests/faults/test_llm_server_faults.py", "tests/integration/test_ingest.py",
    "tests/faults/test_hostile_cli.py", "tests/integration/test_api.py", "tests/integration/test_bulk_restore.py",
    "tests/faults/test_broker_restart.py", "tests/faults/test_scale_out.py",
)


class SharedBroker:
    """Controller side: the embedded broker for every worker, started at the first worker's setup."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Path:
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="credence-kafka-"))
            # The thread lives until the session ends: the JVM is told to die with the thread that
            # started it (PR_SET_PDEATHSIG), so a short-lived starter thread would take it down.
            self._thread = threading.Thread(target=self._run, name="shared-kafka", daemon=True)
            self._thread.start()
        return self.dir

    def _run(self) -> None:
        from credence.config import load_settings
        from credence.streams.ops.broker import EmbeddedBroker

        settings = load_settings()
        broker = EmbeddedBroker(self.dir / "broker", settings.kafka_version, settings.broker_cache_dir)
        try:
            broker.start()
        except Exception as exc:  # noqa: BLE001 - every worker reports it, with the broker's log tail
            (self.dir / "failed").write_text(f"the session's shared broker failed to start: {exc}")
            return
        (self.dir / "ready").write_text(broker.bootstrap)
        self._stop.wait()
        broker.stop()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(60)
            shutil.rmtree(self.dir, ignore_errors=True)


_broker_key = pytest.StashKey[SharedBroker]()


def shared_bootstrap(config: pytest.Config, deadline_s: float = 300.0) -> str | None:
    """On an xdist worker: the shared broker's address once it answers; None when not under xdist."""
    folder = getattr(config, "workerinput", {}).get(_DIR_KEY)
    if folder is None:
        return None
    folder = Path(folder)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if (folder / "failed").exists():
            pytest.fail((folder / "failed").read_text(), pytrace=False)
        if (folder / "ready").exists():
            return (folder / "ready").read_text()
        time.sleep(0.1)  # poll interval while the controller's broker starts
    pytest.fail(f"the session's shared broker was not ready within {deadline_s:.0f}s", pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and not os.environ.get("CREDENCE_KAFKA_BOOTSTRAP"):
        config.stash[_broker_key] = SharedBroker()


def pytest_unconfigure(config: pytest.Config) -> None:
    broker = config.stash.get(_broker_key, None)
    if broker is not None:
        broker.stop()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    broker = node.config.stash.get(_broker_key, None)
    if broker is not None:
        node.workerinput[_DIR_KEY] = str(broker.start())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        """loadscope, with a module's classes kept together and SHARED_RUNS' modules as one unit."""

        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return next((run for prefix, run in SHARED_RUNS.items() if module.startswith(prefix)), module)

    return ModuleScheduling(config, log)


def _rank(item: pytest.Item) -> int:
    module = item.nodeid.split("::", 1)[0]
    return next((i for i, prefix in enumerate(SLOW_FIRST) if module.startswith(prefix)), len(SLOW_FIRST))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every worker sorts the same way (xdist requires identical collections); a run without xdist keeps
    # the plain collection order.
    if hasattr(config, "workerinput"):
        items.sort(key=_rank)
