"""The outage log filter and the back-off: at most one warning per component per interval, whatever the
burst; the next one counts what it stood for; delays jittered under a cap."""

from __future__ import annotations

import logging
import random

from hypothesis import given
from hypothesis import strategies as st

from credence.outage import QuietOutage, backoff_delays


def record(name: str, level: int = logging.ERROR, msg: str = "Unable connect to node") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, (), None)


@given(times=st.lists(st.floats(min_value=0, max_value=120, allow_nan=False), max_size=400),
       names=st.lists(st.sampled_from(["aiokafka", "aiokafka.consumer.fetcher", "faust.transport"]), min_size=1))
def test_at_most_one_warning_per_component_per_interval(times, names):
    now = {"t": 0.0}
    quiet = QuietOutage(10.0, clock=lambda: now["t"])
    passed: dict[str, list[float]] = {}
    for i, t in enumerate(sorted(times)):
        now["t"] = t
        name = names[i % len(names)]
        if quiet.filter(record(name)):
            passed.setdefault(name, []).append(t)
    for stamps in passed.values():
        assert all(b - a >= 10.0 for a, b in zip(stamps, stamps[1:]))
        assert len(stamps) <= 120 / 10 + 1


def test_the_next_warning_counts_what_was_held_back_and_is_a_warning():
    now = {"t": 0.0}
    quiet = QuietOutage(10.0, clock=lambda: now["t"])
    assert quiet.filter(first := record("aiokafka"))
    assert first.levelname == "WARNING"
    for _ in range(500):
        assert not quiet.filter(record("aiokafka"))
    assert quiet.filter(record("aiokafka.consumer.fetcher"))  # another component has its own budget
    now["t"] = 10.0
    assert quiet.filter(later := record("aiokafka"))
    assert "and 500 similar messages in the last 10s" in later.getMessage()


def test_info_lines_pass():
    quiet = QuietOutage(10.0, clock=lambda: 0.0)
    assert all(quiet.filter(record("aiokafka", logging.INFO)) for _ in range(5))


@given(seed=st.integers(0, 2**32), base=st.floats(0.01, 2), cap=st.floats(0.1, 30))
def test_backoff_is_jittered_and_capped(seed, base, cap):
    delays = backoff_delays(base, cap, random.Random(seed))
    values = [next(delays) for _ in range(40)]
    assert all(0 <= d <= max(cap, 0) for d in values)
    assert all(d <= base * 2 ** i for i, d in enumerate(values))


def test_the_flush_time_faust_logs_for_every_blocked_batch_is_throttled_too():
    quiet = QuietOutage(10.0, clock=lambda: 0.0)
    passed = [quiet.filter(record("faust.transport.producer", logging.INFO, "producer flush took 4.2"))
              for _ in range(50)]
    assert passed.count(True) == 1
    assert quiet.filter(record("faust.transport.producer", logging.INFO, "Creating topic x"))
