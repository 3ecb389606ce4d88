"""The adaptive concurrency limit: AIMD within its bounds, in event time."""

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.streams.llm.concurrency import OK, OVERLOAD, AdaptiveGate, AIMDLimit


def test_grows_by_one_per_full_window_of_answers_while_latency_holds():
    aimd = AIMDLimit(minimum=1, maximum=100, limit=10)
    for i in range(10):
        aimd.on_success(now=i, latency_s=0.3, in_flight=10)
    assert aimd.current == 10 and 10.9 < aimd.limit < 11
    aimd.on_success(now=11, latency_s=0.3, in_flight=10)
    assert aimd.current == 11


def test_latency_that_varies_around_its_average_still_holds():
    # Mostly 1.5 s answers and now and then an empty one at once (short and long answers of one server):
    # none is overload, so the limit grows.
    aimd = AIMDLimit(minimum=1, maximum=100, limit=4)
    for i in range(100):
        aimd.on_success(now=i, latency_s=0.001 if i % 10 == 0 else 1.5, in_flight=4)
    assert aimd.current == 8  # in use no more than 4: grown to twice that, and no further


def test_does_not_grow_while_latency_is_well_above_its_baseline_or_the_limit_is_unused():
    aimd = AIMDLimit(minimum=1, maximum=100, limit=10)
    aimd.on_success(now=0, latency_s=0.2, in_flight=10)
    grown = aimd.limit
    aimd.on_success(now=1, latency_s=1.0, in_flight=10)  # 5x the baseline: the server is queueing
    aimd.on_success(now=2, latency_s=0.2, in_flight=2)  # 2 of 10 in use: nothing to learn
    assert aimd.limit == grown


def test_halves_on_overload_once_per_window():
    aimd = AIMDLimit(minimum=2, maximum=100, limit=64)
    aimd.on_overload(now=10.0, started=9.7)
    aimd.on_overload(now=10.1, started=9.8)  # sent before the decrease: the same window refusing again
    assert aimd.current == 32
    aimd.on_overload(now=10.4, started=10.05)  # sent after it: the smaller window is still too many
    assert aimd.current == 16
    for t in range(20):
        aimd.on_overload(now=20.0 + t, started=19.9 + t)
    assert aimd.current == 2


def test_bounds_are_checked_and_the_start_clamped():
    with pytest.raises(ValueError):
        AIMDLimit(minimum=0, maximum=4, limit=2)
    assert AIMDLimit(minimum=1, maximum=4, limit=64).current == 4


_events = st.lists(st.one_of(st.tuples(st.just(OK), st.floats(0.001, 10), st.integers(0, 300)),
                             st.tuples(st.just(OVERLOAD), st.floats(0, 1), st.just(0))), max_size=400)


@given(minimum=st.integers(1, 20), span=st.integers(0, 200), start=st.integers(1, 300), events=_events)
def test_the_limit_stays_within_its_bounds(minimum, span, start, events):
    aimd = AIMDLimit(minimum=minimum, maximum=minimum + span, limit=start)
    for t, (kind, latency, in_flight) in enumerate(events):
        if kind == OK:
            aimd.on_success(now=t * 0.1, latency_s=latency, in_flight=in_flight)
        else:
            aimd.on_overload(now=t * 0.1, started=t * 0.1 - latency)
        assert minimum <= aimd.current <= minimum + span


@given(start=st.integers(8, 256), overloads=st.integers(1, 10))
def test_decreases_on_overload_and_recovers_when_answers_hold(start, overloads):
    aimd = AIMDLimit(minimum=1, maximum=256, limit=start)
    for i in range(overloads):
        aimd.on_overload(now=float(i), started=i - 0.5)
    low = aimd.current
    assert low <= max(1, start // 2)
    t = float(overloads)
    while aimd.current < start:  # additive: one per window of answers, so about start^2/2 answers
        t += 0.01
        aimd.on_success(now=t, latency_s=0.3, in_flight=aimd.current)
        assert t < overloads + 2_000, "did not recover"
    assert aimd.current == start


def test_the_gate_admits_up_to_the_limit_and_reports_outcomes():
    now = [0.0]
    gate = AdaptiveGate(AIMDLimit(minimum=1, maximum=8, limit=2), clock=lambda: now[0])

    async def run():
        entered, release = [], asyncio.Event()

        async def one(i):
            async with gate.slot() as report:
                entered.append(i)
                await release.wait()
                report.outcome = OVERLOAD

        tasks = [asyncio.create_task(one(i)) for i in range(3)]
        while len(entered) < 2:
            await asyncio.sleep(0)
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(entered) == 2 and gate.in_flight == 2  # the third waits for a slot
        now[0] = 1.0
        release.set()
        await asyncio.gather(*tasks)

    asyncio.run(run())
    # Both first refusals were sent at 0.0, before the decrease: one halving, 2 -> 1; the third too.
    assert gate.limit == 1 and gate.in_flight == 0
