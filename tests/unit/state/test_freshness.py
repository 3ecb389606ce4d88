"""Whether a local store found on disk may be brought up to date from its persisted offsets
(streams/state/freshness.py): only while every deletion made since it was last in step is sure to still
be in the changelog, and never when it holds offsets past the changelog's end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from credence.streams.state.freshness import Freshness, distrust

DAY = 86_400.0


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_store_in_step_within_half_the_tombstone_retention_is_trusted(tmp_path):
    clock = Clock()
    fresh = Freshness(tmp_path, DAY, clock)
    fresh.touch([0, 1], force=True)
    clock.now += DAY / 2 - 1
    assert fresh.distrust(0, persisted=41, end=99) is None


def test_a_store_out_of_step_longer_is_discarded(tmp_path):
    clock = Clock()
    fresh = Freshness(tmp_path, DAY, clock)
    fresh.touch([0], force=True)
    clock.now += DAY / 2 + 1
    assert "last in step" in fresh.distrust(0, persisted=41, end=99)


def test_a_store_never_recorded_or_torn_is_discarded(tmp_path):
    fresh = Freshness(tmp_path, DAY, Clock())
    assert "nothing records" in fresh.distrust(3, persisted=5, end=99)
    (tmp_path / "in-step").mkdir()
    (tmp_path / "in-step" / "3").write_text("")  # unreadable: as good as none
    assert "nothing records" in fresh.distrust(3, persisted=5, end=99)


def test_a_store_ahead_of_its_changelog_is_discarded(tmp_path):
    fresh = Freshness(tmp_path, DAY, Clock())
    fresh.touch([0], force=True)
    assert "past the changelog's end" in fresh.distrust(0, persisted=500, end=-1)  # recreated, empty
    assert "past the changelog's end" in fresh.distrust(0, persisted=500, end=499)
    assert fresh.distrust(0, persisted=499, end=499) is None


def test_flushes_record_the_time_at_most_every_so_often(tmp_path):
    clock = Clock()
    fresh = Freshness(tmp_path, DAY, clock)
    fresh.touch([0])
    clock.now += 30
    fresh.touch([0])  # within a minute of the last record: not written again
    assert fresh.age(0) == 30
    clock.now += 30
    fresh.touch([0])
    assert fresh.age(0) == 0


def test_stores_that_die_with_the_process_record_nothing(tmp_path):
    fresh = Freshness(None, DAY, Clock())
    fresh.touch([0], force=True)
    assert fresh.age(0) is None and not any(tmp_path.iterdir())


@given(st.one_of(st.none(), st.integers(-1, 1_000)), st.one_of(st.none(), st.floats(-2 * DAY, 2 * DAY)),
       st.integers(-1, 1_000))
def test_trusted_only_in_step_recently_and_not_ahead(persisted, age, end):
    trusted = distrust(persisted, age, end, DAY / 2) is None
    assert trusted == (age is not None and abs(age) <= DAY / 2 and (persisted is None or persisted <= end))
