"""Running a worker: find the broker, build the app, hand it to Faust's worker loop."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from credence.config import Settings
from credence.errors import BrokerError
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.broker import BrokerState

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
    import faust

    from credence.streams.runtime.app import create_app

    bootstrap = bootstrap_for(settings)
    # Declare (and check) the topics before Faust subscribes: a consumer that joins before its source
    # topics exist is left with no assignment until the next rebalance.
    asyncio.run(ensure_topics(bootstrap, settings, changelogs=True))
    (settings.data_dir / "worker").mkdir(parents=True, exist_ok=True)
    credence = create_app(settings, bootstrap)
    log.info("credence worker %s on %s (store %s, data %s)", settings.app_id, bootstrap,
             settings.table_store, settings.data_dir)
    faust.Worker(credence.app, loglevel=loglevel, quiet=True).execute_from_commandline()
