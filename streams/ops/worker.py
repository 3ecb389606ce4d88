"""Running a worker: find the broker, build the app, hand it to Faust's worker loop."""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from credence import tracing
from credence.config import Settings
from credence.errors import BrokerError
from credence.kafka import diagnose
from credence.outage import BrokerWatch, exit_after, quiet_kafka_logs
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.broker import BrokerState
from credence.streams.state.fence import TRANSACTION_LOG, warm_transactions

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

log = logging.getLogger(__name__)


def embedded_broker_dir(settings: Settings) -> Path:
    return settings.data_dir / "broker"


def bootstrap_for(settings: Settings) -> str:
    """CREDENCE_KAFKA_BOOTSTRAP if set, else the embedded broker started by `credence broker`."""
    if settings.kafka_bootstrap:
        return settings.kafka_bootstrap
    state = BrokerState.read(embedded_broker_dir(settings))
    if state is None:
        raise BrokerError(
            f"no Kafka to talk to: set CREDENCE_KAFKA_BOOTSTRAP=host:port, or start the embedded "
            f"broker first with `credence broker` (it records itself in {embedded_broker_dir(settings)})"
        )
    return state.bootstrap


def run_worker(settings: Settings, loglevel: str = "INFO") -> None:
    bootstrap = bootstrap_for(settings)
    tracing.setup("credence-worker")  # off unless the OTEL_* variables ask for export
    # Declare (and check) the topics before Faust subscribes: a consumer that joins before its source
    # topics exist is left with no assignment until the next rebalance.
    existing = asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    if settings.state.transactions and TRANSACTION_LOG not in existing:
        asyncio.run(warm_transactions(settings, bootstrap))
    (settings.data_dir / "worker").mkdir(parents=True, exist_ok=True)
    credence = build_worker(settings, bootstrap)
    watch = watch_broker(credence, bootstrap)
    quiet_kafka_logs(settings.kafka.outage_warning_interval_s)
    log.info("credence worker %s on %s (store %s, data %s)", settings.app_id, bootstrap,
             settings.table_store, settings.data_dir)
    worker = worker_class()(credence.app, settings.worker_stop_grace_s, lambda: watch.since is not None,
                            loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()


def build_worker(settings: Settings, bootstrap: str) -> Credence:
    """The composition root of a worker: each part is built before the parts it is handed to. The tenant
    directory (the API follows it; the stream steps each tenant with its record's settings), the Stage-2
    encoder that recall shares, recall and the /metrics registry that observes the LLM calls; then the
    runtime with them; then what is mounted beside it: the /v1 API with its MCP tools, /metrics and the
    memory browser."""
    from credence.streams import serving
    from credence.streams.api.directory import Directory
    from credence.streams.api.server import register as register_api
    from credence.streams.runtime.app import create_app, stage2_encoder

    directory = Directory()
    encoder = stage2_encoder(settings)
    metrics = _optional("metrics")  # /metrics, when this build has it (as the browser below)
    meter = metrics.Metrics() if metrics else None
    credence = create_app(settings, bootstrap, tenants=directory.book, encoder=encoder,
                          recall=serving.recall_service(settings.pipeline, encoder),
                          observe=meter.observe if meter else None)
    serving.register(credence)
    register_api(credence, bootstrap, directory)
    if metrics:
        metrics.register(credence, meter)
    browser = _optional("browser")
    if browser:
        browser.register(credence)
    return credence


def _optional(module: str):
    """A serving module this build may leave out (credence.streams.serving), or None."""
    try:
        return importlib.import_module(f"credence.streams.serving.{module}")
    except ImportError:
        return None


def watch_broker(credence: Credence, bootstrap: str) -> BrokerWatch:
    """Probe the cluster from the worker; /status and /metrics carry since when it is unreachable."""
    kafka = credence.settings.kafka

    def on_change(since: float | None) -> None:
        credence.stats.broker_unreachable_since = since or 0.0

    watch = BrokerWatch(lambda: diagnose(bootstrap, kafka), backoff_cap_s=kafka.outage_backoff_max_s,
                        warn_every_s=kafka.outage_warning_interval_s, on_change=on_change)
    credence.app.task(_run_watch(watch))
    return watch


def _run_watch(watch: BrokerWatch):
    async def run(app) -> None:
        await watch.run()

    return run


def worker_class():
    import faust

    class Worker(faust.Worker):
        """Faust's worker, bounded in how long a stop may take (its consumer can wait ~30-90 s on a
        broker that is gone)."""

        def __init__(self, app, stop_grace_s: float, broker_away, **kwargs):
            super().__init__(app, **kwargs)
            self._stop_grace_s, self._broker_away = stop_grace_s, broker_away
            self._watchdog = False

        def _schedule_shutdown(self, signal) -> None:
            if not self._watchdog:
                self._watchdog = True
                exit_after(self._stop_grace_s, "the worker", self._broker_away)
            super()._schedule_shutdown(signal)

    return Worker

