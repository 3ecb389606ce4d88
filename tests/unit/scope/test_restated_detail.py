"""A fact said again with more detail is the same fact (found by the corrections benchmark): "I
work as a nurse." and three days later "I work as a nurse at the hospital." left the user's own job under
the disputed heading, because the rules' Stage-2 read the richer statement as another occupation. Another
value still takes the old one back."""

from __future__ import annotations

from datetime import timedelta

import pytest

from credence.tables.rendering import DISPUTED_HEADING, render_memory_block
from credence.tables.scope import Scope
from tests.unit.scope.conftest import T0


def _block(driver_factory, first: str, then: str) -> tuple[str, str]:
    d = driver_factory()
    for day, said in ((0, first), (3, then)):
        at = T0 + timedelta(days=day)
        d.turn(said, at)
        d.turn("I see.", at + timedelta(minutes=1), role="ai")
    d.flush()
    text = render_memory_block(Scope("acme", "u1", "aria"), list(d.state.entries.values()), d.state.clock).text
    current, _, disputed = text.partition(DISPUTED_HEADING)
    return current, disputed


@pytest.mark.parametrize(("first", "then", "value"), [
    ("I work as a nurse.", "I work as a nurse at the hospital.", "nurse"),
    ("I live in Berlin.", "I live in Berlin near the river.", "Berlin"),
])
def test_a_restatement_with_detail_keeps_the_fact_current(driver_factory, first, then, value):
    current, disputed = _block(driver_factory, first, then)
    assert value in current and value not in disputed


def test_another_value_still_takes_the_old_one_back(driver_factory):
    current, disputed = _block(driver_factory, "I work as a nurse.", "I work as a teacher at the hospital.")
    assert "teacher" in current and "nurse" not in current
