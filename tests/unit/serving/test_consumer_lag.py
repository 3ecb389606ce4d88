"""credence_consumer_lag counts records read_committed can deliver that the worker has not applied: the
commit/abort markers a transactional writer leaves behind each transaction are never lag, and a changelog
the worker holds is its own output once restored."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from aiokafka import TopicPartition

from credence.streams.serving.metrics import WorkerCollector, deliverable_lag

TURNS, CHANGELOG = TopicPartition("p.turns", 0), TopicPartition("app-seen-changelog", 1)


def test_markers_behind_the_last_record_are_not_lag():
    # Records at 0..9 in transactions, a marker after each: the last record is 18, its marker 19. The
    # consumer fetched past the marker (position 20) and applied everything (committed 19 = last record + 1).
    assert deliverable_lag(end=20, position=20, committed=19, in_flight=0) == 0


def test_records_not_fetched_or_not_applied_are_lag():
    assert deliverable_lag(end=20, position=15, committed=10, in_flight=0) == 5
    assert deliverable_lag(end=20, position=20, committed=12, in_flight=3) == 3
    assert deliverable_lag(end=20, position=None, committed=12, in_flight=0) == 8  # no fetch position yet
    assert deliverable_lag(end=None, position=3, committed=3, in_flight=0) is None  # nothing fetched yet


def collector(states: dict, *, committed: dict, unacked=(), in_recovery=False, remaining=None):
    subscription = SimpleNamespace(assignment=SimpleNamespace(state_value=states.get))
    aiokafka = SimpleNamespace(_subscription=SimpleNamespace(subscription=subscription))
    # highwater(): what Faust's consumer answers, for a changelog the stale highwater of its last restore fetch.
    consumer = SimpleNamespace(assignment=lambda: set(states) | {CHANGELOG}, _committed_offset=committed,
                               highwater=lambda tp: states[tp].highwater if tp in states else 38,
                               _unacked_messages=list(unacked),
                               _thread=SimpleNamespace(_ensure_consumer=lambda: aiokafka))
    recovery = SimpleNamespace(in_recovery=in_recovery, active_remaining=lambda: Counter(remaining or {}))
    tables = SimpleNamespace(changelog_topics={CHANGELOG.topic}, recovery=recovery)
    return SimpleNamespace(credence=SimpleNamespace(app=SimpleNamespace(_consumer=consumer, tables=tables)))


def lags(fake) -> dict:
    (family,) = WorkerCollector._lag(fake)
    return {(s.labels["topic"], int(s.labels["partition"])): s.value for s in family.samples}


def fetch_state(highwater, lso, position):
    return SimpleNamespace(highwater=highwater, lso=lso, position=position, has_valid_position=position is not None)


def test_an_idle_caught_up_worker_reports_zero_on_every_partition():
    # The old formula (highwater − committed; a changelog's committed offset is None) reported 1 and 38.
    fake = collector({TURNS: fetch_state(20, 20, 20)}, committed={TURNS: 19})
    assert lags(fake) == {(TURNS.topic, 0): 0, (CHANGELOG.topic, 1): 0}


def test_a_changelog_being_restored_reports_what_is_left():
    fake = collector({TURNS: fetch_state(20, 20, 20)}, committed={TURNS: 20}, in_recovery=True,
                     remaining={CHANGELOG: 38})
    assert lags(fake)[(CHANGELOG.topic, 1)] == 38


def test_unacknowledged_records_count_until_applied():
    message = SimpleNamespace(tp=TURNS)
    fake = collector({TURNS: fetch_state(20, 18, 18)}, committed={TURNS: 15}, unacked=[message])
    assert lags(fake)[(TURNS.topic, 0)] == 1  # up to the last stable offset (18), one record not yet applied
