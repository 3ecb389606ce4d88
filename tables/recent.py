"""The recent conversation of one scope: its newest turns and a rolling memo of the older ones (the
origin's recent.json compression and review).

Past `recent_compress_threshold_items` turns, all but the newest `recent_history_max_items - 1` are the
*head*: a summarise task rewrites memo + head into a new memo. The answer is applied only if that head is
still the head (same memo, same turn ids first): the origin anchors on content fingerprints because its file
changes while the model runs; here the anchor is the turn ids, and what can move it is the bound on kept
turns (`recent_max_items`: the oldest go while no summary lands). A stale answer changes nothing and the
scope asks again. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.tables.tokens import TokenCounter, approximate_tokens

ELLIPSIS = " … "
_TURN_ID = attrgetter("turn_id")


@dataclass(frozen=True, slots=True)
class RecentTurn:
    turn_id: str
    role: str  # "user" | "ai"
    text: str
    ts: str  # ISO-8601, as on credence.turns

    def to_dict(self) -> dict[str, str]:
        return {"turn_id": self.turn_id, "role": self.role, "text": self.text, "ts": self.ts}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RecentTurn:
        return cls(d["turn_id"], d["role"], d["text"], d["ts"])


@dataclass(frozen=True, slots=True)
class RecentLog:
    memo: str = ""
    memo_version: int = 0  # summaries applied; a request names the memo it rewrote by it
    memo_turns: int = 0  # turns the memo stands for
    dropped: int = 0  # turns the bound dropped without a summary (the memo does not stand for them)
    turns: tuple[RecentTurn, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.turns and not self.memo and not self.dropped

    def to_dict(self) -> dict[str, Any]:
        return {"memo": self.memo, "memo_version": self.memo_version, "memo_turns": self.memo_turns,
                "dropped": self.dropped, "turns": [t.to_dict() for t in self.turns]}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> RecentLog:
        if not d:
            return cls()
        return cls(memo=d.get("memo", ""), memo_version=d.get("memo_version", 0), memo_turns=d.get("memo_turns", 0),
                   dropped=d.get("dropped", 0), turns=tuple(RecentTurn.from_dict(t) for t in d.get("turns", ())))


def clip(text: str, max_tokens: int) -> str:
    """A message over `max_tokens` (approximated) keeps its head and tail halves, as the origin cuts one
    (RECENT_PER_MESSAGE_MAX_TOKENS): the start says what it is about, the end what was concluded."""
    if approximate_tokens(text) <= max_tokens:
        return text
    half = max(1, max_tokens * 2)  # ~4 characters a token in Latin script, half each side; fewer in CJK
    while half > 1 and approximate_tokens(text[:half]) + approximate_tokens(text[-half:]) > max_tokens - 1:
        half = half * 3 // 4
    return text[:half].rstrip() + ELLIPSIS + text[-half:].lstrip()


def append_turn(log: RecentLog, turn: RecentTurn, *,
                settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> RecentLog:
    """The log with `turn` at the end (its text clipped), the oldest dropped past `recent_max_items`. A turn
    id already kept changes nothing (a duplicate delivery)."""
    if turn.turn_id in map(_TURN_ID, log.turns):
        return log
    text = clip(turn.text, settings.recent_per_message_max_tokens)
    turns = (*log.turns, turn if text is turn.text else RecentTurn(turn.turn_id, turn.role, text, turn.ts))
    over = max(0, len(turns) - settings.recent_max_items)
    # Built directly, not by dataclasses.replace: this runs for every turn of every scope.
    return RecentLog(log.memo, log.memo_version, log.memo_turns, log.dropped + over, turns[over:])


def summary_head(log: RecentLog, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> tuple[RecentTurn, ...]:
    """The turns a summary is due for (empty while the log is within the threshold): every turn but the
    newest `recent_history_max_items - 1`, so the memo and those make `recent_history_max_items` items."""
    if len(log.turns) <= settings.recent_compress_threshold_items:
        return ()
    return log.turns[: len(log.turns) - (settings.recent_history_max_items - 1)]


def head_is_current(log: RecentLog, memo_version: int, head_ids: Sequence[str]) -> bool:
    """Is the head a summary was asked for still the log's head, under the same memo?"""
    return (log.memo_version == memo_version and 0 < len(head_ids) <= len(log.turns)
            and all(t.turn_id == i for t, i in zip(log.turns, head_ids, strict=False)))


def apply_summary(log: RecentLog, memo_version: int, head_ids: Sequence[str], summary: str, *,
                  settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> RecentLog | None:
    """The memo replaces the summarised head; None when the head moved meanwhile (the answer is stale)."""
    if not head_is_current(log, memo_version, head_ids):
        return None
    return replace(log, memo=clip_summary(summary, settings.recent_summary_max_tokens),
                   memo_version=log.memo_version + 1, memo_turns=log.memo_turns + len(head_ids),
                   turns=log.turns[len(head_ids):])


def clip_summary(summary: str, max_tokens: int) -> str:
    """A memo within `max_tokens` (approximated): an over-long answer is cut back to its last sentence end
    inside the budget (the origin's stage-2 trim), or hard at the budget when none is there."""
    summary = summary.strip()
    if approximate_tokens(summary) <= max_tokens:
        return summary
    cut = summary[: max_tokens * 4]
    while approximate_tokens(cut) > max_tokens:
        cut = cut[: len(cut) * 9 // 10]
    end = max(cut.rfind(". "), cut.rfind("\n"), cut.rfind("! "), cut.rfind("? "))
    return (cut[: end + 1] if end > 0 else cut).strip()


@dataclass(frozen=True, slots=True)
class RecentView:
    memo: str | None  # None: no memo yet, or it did not fit the budget
    turns: tuple[RecentTurn, ...]  # the newest turns, oldest first: a contiguous tail of the log
    tokens: int
    left_out_turns: int  # kept turns older than the tail shown


def turn_tokens(turn: RecentTurn, count_tokens: TokenCounter) -> int:
    return count_tokens(f"{turn.role}: {turn.text}")


def render(log: RecentLog, max_tokens: int, count_tokens: TokenCounter = approximate_tokens) -> RecentView:
    """What fits `max_tokens`: the newest turns first (never one older than a turn left out, so the tail
    reads as a conversation), then the memo if it fits what is left."""
    used, shown = 0, 0
    for turn in reversed(log.turns):
        cost = turn_tokens(turn, count_tokens)
        if used + cost > max_tokens:
            break
        used, shown = used + cost, shown + 1
    memo = None
    if log.memo and used + count_tokens(log.memo) <= max_tokens:
        memo, used = log.memo, used + count_tokens(log.memo)
    tail = log.turns[len(log.turns) - shown:] if shown else ()
    return RecentView(memo=memo, turns=tail, tokens=used, left_out_turns=len(log.turns) - shown)
