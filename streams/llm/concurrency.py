"""How many requests a worker keeps in flight at a model server: a limit that adapts (AIMD).

A vLLM server batches hundreds of sequences; a fixed small limit leaves it idle, a fixed large one
overloads a small deployment. So the limit grows by one per limit's worth of answers while latency
holds (additive increase; only while the limit is actually used, so an idle worker does not inflate
it), and halves on a sign of overload — HTTP 429 or 503, or a timeout (multiplicative decrease) — once
per window: a refusal of a request sent before the last decrease was already answered by it. It stays
within [minimum, maximum]; maximum is also the size of the HTTP connection pool.

`AIMDLimit` is the pure rule (it takes `now` and the events); `AdaptiveGate` holds requests to it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

OK, OVERLOAD, NEUTRAL = "ok", "overload", "neutral"  # what one answer says about the server's load
BASELINE_WEIGHT = 0.05  # of each answer's latency in the baseline (about the last 20 answers)


@dataclass
class AIMDLimit:
    minimum: int
    maximum: int
    limit: float
    backoff: float = 0.5  # the multiplicative decrease
    # Latency "holds" while within this factor of the best recent latency; beyond it the limit stops
    # growing (a server queueing requests answers slower before it refuses them).
    latency_tolerance: float = 2.0
    baseline_s: float | None = None
    _last_decrease: float | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.maximum:
            raise ValueError(f"concurrency bounds need 1 <= minimum <= maximum, got {self.minimum}, {self.maximum}")
        self.limit = float(min(max(self.limit, self.minimum), self.maximum))

    @property
    def current(self) -> int:
        return int(self.limit)

    def on_success(self, now: float, latency_s: float, in_flight: int) -> None:
        # The baseline is a slow moving average, not the best latency seen: answers of one server vary
        # with their length (a fast empty answer must not make every normal one look like overload), and a
        # server that got slower for good (a bigger model, longer prompts) becomes the new normal.
        base = latency_s if self.baseline_s is None else self.baseline_s
        self.baseline_s = base + BASELINE_WEIGHT * (latency_s - base)
        if latency_s > base * self.latency_tolerance or in_flight * 2 < self.limit:
            return
        self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)

    def on_overload(self, now: float, started: float) -> None:
        """started: when the refused request was sent."""
        if self._last_decrease is not None and started <= self._last_decrease:
            return
        self._last_decrease = now
        self.limit = max(float(self.minimum), self.limit * self.backoff)


class AdaptiveGate:
    """Admits a request while fewer than the current limit are in flight; each request reports what
    its answer said (OK with its latency, OVERLOAD, or NEUTRAL: an error that says nothing of load)."""

    def __init__(self, limit: AIMDLimit, clock=time.monotonic) -> None:
        self.aimd = limit
        self._clock = clock
        self._in_flight = 0
        self._changed = asyncio.Condition()

    @property
    def limit(self) -> int:
        return self.aimd.current

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[_Report]:
        async with self._changed:
            await self._changed.wait_for(lambda: self._in_flight < self.aimd.current)
            self._in_flight += 1
        report = _Report(self._clock())
        try:
            yield report
        finally:
            now = self._clock()
            if report.outcome == OK:
                self.aimd.on_success(now, now - report.started, self._in_flight)
            elif report.outcome == OVERLOAD:
                self.aimd.on_overload(now, report.started)
            async with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()


@dataclass
class _Report:
    started: float
    outcome: str = NEUTRAL
