"""As-of reads from the store's kept entry versions (streams/state/versions.py): the same answer as folding
the scope's whole journal (tables.validity.as_of), for every instant, with archived entries and changes of
meaning; an instant before the versions kept is refused, never answered with less."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.streams.scope.context import StepContext
from credence.streams.state.ownership import Ownership
from credence.streams.state.versions import Truncated
from credence.tables.entries import ARCHIVED, Entry, changed, new_reflection
from credence.tables.scope import Scope
from credence.tables.validity import as_of

from .conftest import SCOPE, T0, new_tables, store_over

H = timedelta(hours=1)


def journal(store, steps) -> list[Entry]:
    """Apply each (now, change) as one batch; every snapshot the steps journalled, in order."""
    snapshots = []
    for now, change in steps:
        live = store.live(SCOPE)
        ctx = StepContext(now=now, powerful=True, boot="b", memory=MemorySettings(), pipeline=PipelineSettings())
        change(live.state, ctx)
        records = [e.record for e in ctx.emits if e.topic.name == "evidence"]
        store.write(SCOPE, {r["entry_id"] for r in records}, records)
        snapshots += [Entry.from_dict(r["entry"]) for r in records]
    return snapshots


def history(store) -> list[Entry]:
    scope = Scope.parse(SCOPE)
    a, b = new_reflection("r-a", scope, "likes tea", T0), new_reflection("r-b", scope, "hikes", T0 + H / 2)

    def signal(state, ctx):
        ctx.put(state, changed(state.entries["r-a"], ctx.now, importance=9), "signal", "user_confirm",
                state.entries["r-a"])

    def rewrite(state, ctx):
        ctx.put(state, changed(state.entries["r-a"], ctx.now, text="likes green tea"), "merged", "x",
                state.entries["r-a"])

    def leave(state, ctx):
        before = state.entries["r-a"]
        ctx.archive(state, changed(before, ctx.now, status=ARCHIVED, archived_at=ctx.now), before, "sweep")

    def back(state, ctx):
        ctx.put(state, replace(a, created_at=ctx.now, updated_at=ctx.now, valid_from=ctx.now), "created", "x")

    return journal(store, [(T0, lambda s, c: c.put(s, a, "created", "x")),
                           (T0 + H / 2, lambda s, c: c.put(s, b, "created", "x")),
                           (T0 + H, signal), (T0 + 2 * H, rewrite), (T0 + 3 * H, leave), (T0 + 5 * H, back)])


def test_as_of_from_the_kept_versions_is_the_whole_journal_folded():
    store = store_over(new_tables(), Ownership(4, "credence.turns"))
    snapshots = history(store)
    state = store.get(SCOPE)
    assert state.entries["r-a"].version == 6  # archived, then back: its version line went on
    for minutes in range(-30, 7 * 60, 10):
        at = T0 + timedelta(minutes=minutes)
        want = as_of(snapshots, at)
        got = {e.id: e for e in store.as_of(state, at)}
        assert got == want, at


def test_an_instant_before_the_kept_versions_is_refused():
    store = store_over(new_tables(), Ownership(4, "credence.turns"), history_max=2)
    history(store)
    state = store.get(SCOPE)
    assert {e.id for e in store.as_of(state, T0 + 6 * H)} == {"r-a", "r-b"}  # within the two kept
    with pytest.raises(Truncated) as refused:
        store.as_of(state, T0 + H / 4)
    assert refused.value.entry_id == "r-a"
