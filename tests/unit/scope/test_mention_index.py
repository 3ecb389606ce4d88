"""The word index behind AI-mention matching (quiet.mention_candidates) only narrows the search: under
any churn of entries (created, re-worded, archived) and any overlap share, matching against its candidates
names exactly the entries a match against every entry names."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.streams.scope import quiet
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import new_reflection
from credence.tables.mentions import mentioned_in
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
WORDS = ["tea", "green", "hiking", "rust", "lisbon", "dog", "mention", "while", "topic", "garden", "piano", "7"]
TEXT = st.lists(st.sampled_from(WORDS), min_size=0, max_size=7).map(lambda ws: "The user " + " ".join(ws))
OP = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 9), TEXT),
    st.tuples(st.just("archive"), st.integers(0, 9), st.just("")),
    st.tuples(st.just("ask"), st.just(0), TEXT),
)


def test_an_ai_text_naming_one_entry_fetches_it_and_not_the_ones_sharing_common_words():
    state = ScopeState(scope=SCOPE)
    ctx = StepContext(now=T0, powerful=True, boot="b", memory=MemorySettings(), pipeline=PipelineSettings())
    for i in range(50):
        entry = new_reflection(f"r-{i}", Scope.parse(SCOPE), f"The user grows basil{i} and mint{i} in a garden", T0)
        ctx.put(state, entry, "created", "test")
    said = "So you grow basil7 and mint7 in your garden?"
    candidates = quiet.mention_candidates(state, said, ctx)
    assert [e.id for e in mentioned_in(said, candidates)] == ["r-7"]
    # each is keyed by its rarest words: "grow" and "garden", in every entry, fetch none of them
    assert [e.id for e in candidates] == ["r-7"]


@settings(max_examples=150, deadline=None)
@given(st.lists(OP, max_size=30), st.sampled_from([0.01, 0.3, 0.5, 0.75, 0.9, 1.0]))
def test_candidates_never_miss_a_match(ops, share):
    state = ScopeState(scope=SCOPE)
    ctx = StepContext(now=T0, powerful=True, boot="b", memory=MemorySettings(ai_mention_min_overlap=share),
                      pipeline=PipelineSettings())
    for kind, n, text in ops:
        entry_id = f"r-{n}"
        if kind == "put":
            old = state.entries.get(entry_id)
            entry = new_reflection(entry_id, Scope.parse(SCOPE), text, T0) if old is None else replace(old, text=text)
            ctx.put(state, entry, "created", "test")
        elif kind == "archive" and entry_id in state.entries:
            ctx.archive(state, state.entries[entry_id], state.entries[entry_id], "test")
        elif kind == "ask":
            expected = {e.id for e in mentioned_in(text, state.entries.values(), settings=ctx.memory)}
            candidates = quiet.mention_candidates(state, text, ctx)
            assert {e.id for e in mentioned_in(text, candidates, settings=ctx.memory)} == expected
            assert len({e.id for e in candidates}) == len(candidates)
