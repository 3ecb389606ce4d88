"""The recent conversation's log: bounded turns, the summary's head and its check, the
token-budgeted render. Pure functions, so properties over many logs are cheap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.config.memory import MemorySettings
from credence.tables.recent import (
    RecentLog,
    RecentTurn,
    append_turn,
    apply_summary,
    clip,
    clip_summary,
    render,
    summary_head,
    turn_tokens,
)
from credence.tables.tokens import approximate_tokens

SMALL = MemorySettings(recent_compress_threshold_items=6, recent_history_max_items=3, recent_max_items=9,
                       recent_per_message_max_tokens=20)


def turn(i: int, text: str | None = None, role: str = "user") -> RecentTurn:
    return RecentTurn(f"t{i}", role, text if text is not None else f"turn number {i}", "2026-03-02T12:00:00Z")


def fed(n: int, memory: MemorySettings = SMALL) -> RecentLog:
    log = RecentLog()
    for i in range(n):
        log = append_turn(log, turn(i), settings=memory)
    return log


texts = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x30FF), max_size=300)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), texts), max_size=60))
def test_the_log_keeps_at_most_recent_max_items_newest_distinct_turns_in_order(feed):
    log = RecentLog()
    for i, text in feed:
        log = append_turn(log, turn(i, text), settings=SMALL)
    distinct = list(dict.fromkeys(i for i, _ in feed))
    assert len(log.turns) <= SMALL.recent_max_items
    assert log.dropped + len(log.turns) >= len(distinct)  # every distinct turn kept or counted as dropped
    ids = [t.turn_id for t in log.turns]
    assert len(ids) == len(set(ids))  # a redelivered turn is kept once
    for t in log.turns:
        assert approximate_tokens(t.text) <= SMALL.recent_per_message_max_tokens  # clipped


def test_a_duplicate_turn_changes_nothing_and_the_bound_drops_the_oldest():
    log = fed(9)
    assert append_turn(log, turn(4), settings=SMALL) is log
    more = append_turn(log, turn(9), settings=SMALL)
    assert [t.turn_id for t in more.turns] == [f"t{i}" for i in range(1, 10)] and more.dropped == 1


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 9))
def test_a_summary_is_due_only_past_the_threshold_and_leaves_the_newest_history_max_items_minus_one(n):
    log = fed(n)
    head = summary_head(log, settings=SMALL)
    if n <= SMALL.recent_compress_threshold_items:
        assert head == ()
        return
    assert len(log.turns) - len(head) == SMALL.recent_history_max_items - 1
    done = apply_summary(log, log.memo_version, [t.turn_id for t in head], "memo", settings=SMALL)
    assert done.memo == "memo" and done.memo_turns == len(head) and done.memo_version == 1
    assert [t.turn_id for t in done.turns] == [t.turn_id for t in log.turns[len(head):]]
    assert summary_head(done, settings=SMALL) == ()  # memo + the rest: within the threshold


@settings(max_examples=80, deadline=None)
@given(st.integers(7, 9), st.integers(0, 12))
def test_a_summary_applies_only_while_its_head_is_still_the_head(n, later):
    """Turns appended meanwhile leave the head in place (the answer applies, they stay after it); the bound
    dropping the oldest moves it (the answer is stale: None, nothing changes)."""
    log = fed(n)
    head = [t.turn_id for t in summary_head(log, settings=SMALL)]
    now = log
    for i in range(n, n + later):
        now = append_turn(now, turn(i), settings=SMALL)
    done = apply_summary(now, log.memo_version, head, "memo", settings=SMALL)
    if now.dropped > log.dropped:
        assert done is None
    else:
        assert done is not None and [t.turn_id for t in done.turns] == [t.turn_id for t in now.turns[len(head):]]
    assert apply_summary(now, log.memo_version + 1, head, "memo", settings=SMALL) is None  # another memo since


def test_an_over_long_summary_is_cut_back_to_a_sentence_end_within_its_budget():
    text = " ".join(f"Sentence number {i} says something." for i in range(100))
    cut = clip_summary(text, 40)
    assert approximate_tokens(cut) <= 40 and cut.endswith(".") and text.startswith(cut)
    assert clip_summary("  short.  ", 40) == "short."


def test_a_long_message_keeps_its_head_and_tail():
    text = "START " + "word " * 500 + " END"
    cut = clip(text, 20)
    assert cut.startswith("START") and cut.endswith("END") and approximate_tokens(cut) <= 20
    cjk = "猫" * 400  # 1.5 tokens a character: the cut is counted, not assumed at 4 characters a token
    assert approximate_tokens(clip(cjk, 20)) <= 20


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 9), st.sampled_from(["", "a memo of the older turns", "m " * 60]), st.integers(1, 120))
def test_the_render_keeps_to_its_budget_with_a_contiguous_tail_of_the_newest_turns(n, memo, budget):
    log = RecentLog(memo=memo, turns=fed(n).turns)
    view = render(log, budget)
    shown = list(view.turns)
    assert view.tokens <= budget
    assert view.tokens == sum(turn_tokens(t, approximate_tokens) for t in shown) + (
        approximate_tokens(view.memo) if view.memo else 0)
    assert shown == list(log.turns[len(log.turns) - len(shown):])  # the newest, in order, none skipped
    assert view.left_out_turns == len(log.turns) - len(shown)
    if view.left_out_turns:  # the next older turn did not fit
        older = log.turns[len(log.turns) - len(shown) - 1]
        assert view.tokens - (approximate_tokens(view.memo) if view.memo else 0) + turn_tokens(
            older, approximate_tokens) > budget
    if memo and view.memo is None:
        assert view.tokens + approximate_tokens(memo) > budget


def test_the_settings_refuse_a_threshold_a_summary_could_not_get_under():
    with pytest.raises(ValueError, match="recent_history_max_items"):
        MemorySettings(recent_compress_threshold_items=5, recent_history_max_items=8)
    with pytest.raises(ValueError, match="recent_max_items"):
        MemorySettings(recent_compress_threshold_items=20, recent_max_items=20)


def test_the_log_round_trips_and_an_empty_one_is_left_out_of_old_states():
    log = apply_summary(fed(8), 0, ["t0", "t1", "t2", "t3", "t4", "t5"], "memo", settings=SMALL)
    assert RecentLog.from_dict(log.to_dict()) == log
    assert RecentLog.from_dict(None) == RecentLog() and RecentLog().empty
