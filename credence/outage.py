"""Calm while the Kafka brokers are unreachable.

aiokafka retries a lost broker in a tight loop and logs every attempt (measured: ~1,000 ERROR lines per
second from one worker). ``QuietOutage`` lets one warning per component (logger) through every
``interval_s`` and counts the rest into the next one. ``BrokerWatch`` probes the cluster with back-off
(exponential, full jitter, capped) while it is away and records since when, for /status and /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable

# Logger names whose warnings and errors are all about reaching the cluster.
NOISY = ("aiokafka", "faust.transport", "faust.tables.recovery")


class QuietOutage(logging.Filter):
    """At most one WARNING+ record per logger per `interval_s`; the next one says how many it stood for."""

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        now, name = self.clock(), record.name
        last = self._last.get(name)
        if last is not None and now - last < self.interval_s:
            self._held[name] = self._held.get(name, 0) + 1
            return False
        self._last[name] = now
        held = self._held.pop(name, 0)
        if held:
            record.msg = f"{record.getMessage()} (and {held} similar messages in the last {now - last:.0f}s)"
            record.args = ()
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def quiet_kafka_logs(interval_s: float = 10.0) -> QuietOutage:
    """Attach one QuietOutage to every Kafka client logger that exists now (call after the imports:
    a filter on a logger applies to the records created there, not to its children's)."""
    quiet = QuietOutage(interval_s)
    for name in [n for n in logging.root.manager.loggerDict if n.startswith(NOISY)] + list(NOISY):
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietOutage) for f in logger.filters):
            logger.addFilter(quiet)
    return quiet


def backoff_delays(base_s: float, cap_s: float, rng: random.Random | None = None):
    """Full-jitter exponential back-off: attempt n waits uniform(0, min(cap, base * 2**n)) seconds."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        yield rng.uniform(0, min(cap_s, base_s * 2 ** attempt))
        attempt = min(attempt + 1, 60)


class BrokerWatch:
    """Probes the cluster; `since` is the wall-clock time the brokers were first found unreachable (None
    while reachable). One warning when the outage starts, at most one per `warn_every_s` while it lasts,
    one info line when it ends."""

    def __init__(self, probe: Callable[[], Awaitable[str]], *, healthy_every_s: float = 2.0,
                 backoff_cap_s: float = 10.0, warn_every_s: float = 10.0,
                 on_change: Callable[[float | None], None] = lambda since: None,
                 log: logging.Logger | None = None):
        self.probe, self.healthy_every_s, self.backoff_cap_s = probe, healthy_every_s, backoff_cap_s
        self.warn_every_s, self.on_change = warn_every_s, on_change
        self.log = log or logging.getLogger("credence.broker")
        self.since: float | None = None
        self._warned = 0.0

    async def check(self) -> bool:
        """One probe; updates `since` and logs a transition. Returns whether the cluster answered."""
        cause = await self.probe()
        now = time.time()
        if not cause:
            if self.since is not None:
                self.log.info("Kafka reachable again after %.0fs", now - self.since)
                self.since = None
                self.on_change(None)
            return True
        if self.since is None:
            self.since = now
            self.on_change(now)
        if time.monotonic() - self._warned >= self.warn_every_s:
            self._warned = time.monotonic()
            self.log.warning("broker unreachable since %s: %s", iso(self.since), cause)
        return False

    async def run(self) -> None:
        delays = None
        while True:
            if await self.check():
                delays = None
                await asyncio.sleep(self.healthy_every_s)  # probe interval while healthy
            else:
                delays = delays or backoff_delays(0.5, self.backoff_cap_s)
                await asyncio.sleep(next(delays))


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def exit_after(grace_s: float, what: str) -> threading.Timer:
    """Exit the process `grace_s` from now, whatever still waits on the brokers (called when a stop is
    asked for). Safe because nothing uncommitted is ever needed: offsets are committed only for applied
    records (worker) or durable shards (sink), and the worker's RocksDB store has its write-ahead log in
    the OS already."""
    log = logging.getLogger("credence")

    def expire() -> None:
        log.warning("%s took longer than %.0fs to stop (Kafka unreachable?); exiting without further commits",
                    what, grace_s)
        for handler in logging.getLogger().handlers:
            handler.flush()
        os._exit(0)

    timer = threading.Timer(grace_s, expire)
    timer.daemon = True
    timer.start()
    return timer
