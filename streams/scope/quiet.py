"""What a step may skip on a scope of thousands of entries: scratch marks kept beside the state (never
stored), so a step looks at what changed and at what time alone can move, not at every entry.

Entries are immutable: the same object gives the same answer. Every entry the step puts or removes is
reported (`ScopeState.touch`) to each watcher (`ScopeState.watch`), so a watcher keeps its view of the
entries by looking at those ids only; a watcher seen for the first time (a freshly loaded state, marks
dropped for other settings) starts from every entry.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import ScopeState
from credence.tables.entries import Entry
from credence.tables.mentions import content_words


def transition_marks(state: ScopeState, ctx: StepContext) -> tuple[dict, dict]:
    """The reflections a score-transition pass may skip: ("instant") those found idle at this very
    instant, and ("still") those time alone cannot move (lifecycle.time_cannot_move), kept while the
    clock only moves forward. Both hold entry objects: a changed entry is a new object, checked again.
    Marks made under other settings (the object itself, not its id, which Python may reuse) are dropped."""
    marks = state.quiet
    at = marks.get("at")
    if at is None or at[1] is not ctx.memory or ctx.now < at[0]:
        marks.update({"at": (ctx.now, ctx.memory), "instant": {}, "still": {}, "waiting": ({}, [])})
        marks.pop(_UNSETTLED + "transitions", None)  # what was settled under the old marks is not now
    elif ctx.now != at[0]:
        marks["at"], marks["instant"] = (ctx.now, ctx.memory), {}
    return marks["instant"], marks["still"]


def due_reflections(state: ScopeState, ctx: StepContext) -> tuple[list[Entry], dict, dict]:
    """The reflections a score-transition pass must look at (any order), with the marks it keeps."""
    instant, still = transition_marks(state, ctx)
    waiting = state.quiet["waiting"][0]
    moving = unsettled(state, "transitions",
                       lambda e: e.kind != "reflection" or still.get(e.id) is e or waiting.get(e.id) is e)
    return [e for e in moving if instant.get(e.id) is not e], instant, still


def wait_for_place(state: ScopeState, entry: Entry) -> None:
    """A reflection due for promotion while the scope's promotions in flight are at their cap: left out of
    later passes (as the object it is) until `waiting_in_order` hands it back for a freed place."""
    waiting, order = state.quiet["waiting"]
    if entry.id not in waiting:
        bisect.insort(order, entry.id)
    waiting[entry.id] = entry


def waiting_in_order(state: ScopeState, has_place: Callable[[], bool]) -> Iterator[Entry]:
    """The waiting reflections, by id, while `has_place()`: with the fresh ones merged in by id, a pass
    asks the same reflections a pass over every entry would (the first due ones by id). One that changed
    meanwhile is not handed back: it is fresh (touched) again."""
    waiting, order = state.quiet["waiting"]
    looked_at = state.quiet[_UNSETTLED + "transitions"]
    while order and has_place():
        entry = waiting.pop(order.pop(0))
        looked_at.add(entry.id)  # no longer settled as waiting: later passes look at it again
        if state.entries.get(entry.id) is entry:
            yield entry


def sweep_marks(state: ScopeState, ctx: StepContext) -> dict:
    """The entries no later sweep can change (lifecycle.sweep_cannot_change), as the objects they were:
    a changed entry is a new object and is swept again. Dropped with other settings."""
    marks = state.quiet.get("sweep")
    if marks is None or marks[0] is not ctx.memory:
        marks = state.quiet["sweep"] = (ctx.memory, {})
        state.quiet.pop(_UNSETTLED + "sweep", None)  # what was settled under the old marks is not now
    return marks[1]


def due_for_sweep(state: ScopeState, ctx: StepContext) -> tuple[list[Entry], dict]:
    still = sweep_marks(state, ctx)
    return unsettled(state, "sweep", lambda e: still.get(e.id) is e), still


def promote_blocked(state: ScopeState) -> list[Entry]:
    """The reflections whose promotion is blocked, by id."""
    return sorted(unsettled(state, "blocked", lambda e: e.kind != "reflection" or e.status != "promote_blocked"),
                  key=lambda e: e.id)


_UNSETTLED = "unsettled:"


def unsettled(state: ScopeState, name: str, settled: Callable[[Entry], bool]) -> list[Entry]:
    """The entries not known to be `settled`: each one found settled is left out of every later call until
    it changes (is touched), so a call costs what changed and what is still unsettled, not the scope's size.
    `settled` must hold for an entry object until the marks it reads are dropped with `state.quiet`."""
    ids = state.quiet.get(_UNSETTLED + name)
    touched = state.watch(name)
    if ids is None or touched is None:
        ids = state.quiet[_UNSETTLED + name] = set(state.entries)
    else:
        ids |= touched
    out = []
    for entry_id in list(ids):
        entry = state.entries.get(entry_id)
        if entry is None or settled(entry):
            ids.discard(entry_id)
        else:
            out.append(entry)
    return out


def mention_candidates(state: ScopeState, text: str, ctx: StepContext) -> list[Entry]:
    """A superset of the entries a lexical mention match (tables.mentions.mentioned_in) can name in
    `text`, from a word index kept up to date with the touched entries.

    An entry of m content words matches when at least k of them are in the text (k the least count whose
    share m reaches `ai_mention_min_overlap`); then at most m - k of its words are missing, so any m - k + 1
    of them hold one the text has. Each entry is indexed under that many of its words, the rarest in the
    scope when it is indexed (which ones changes the cost only, never the answer): words that every entry
    shares ("mention") then fetch none of them."""
    index = state.quiet.get("mentions")
    touched = state.watch("mentions")
    if index is None or touched is None or index.memory is not ctx.memory:
        index = state.quiet["mentions"] = _MentionIndex(ctx.memory)
        for entry in state.entries.values():  # rarity over the whole scope before the first choice
            index.count(content_words(entry.text), 1)
        for entry in state.entries.values():
            index.add(entry, _keys_needed(len(content_words(entry.text)), ctx))
    else:
        for entry_id in touched:
            index.remove(entry_id)
            entry = state.entries.get(entry_id)
            if entry is not None:
                index.count(content_words(entry.text), 1)
                index.add(entry, _keys_needed(len(content_words(entry.text)), ctx))
    found = set().union(*(index.postings.get(word, ()) for word in content_words(text)))
    return [state.entries[i] for i in sorted(found)]


class _MentionIndex:
    def __init__(self, memory) -> None:
        self.memory = memory  # the settings it was built under (the share decides the keys)
        self.postings: dict[str, set[str]] = {}  # key word -> entry ids
        self.keys: dict[str, tuple[str, ...]] = {}  # entry id -> its key words
        self.words: dict[str, frozenset[str]] = {}  # entry id -> all its content words (counted)
        self.frequency: dict[str, int] = {}  # word -> entries holding it

    def count(self, words: frozenset[str], delta: int) -> None:
        for word in words:
            self.frequency[word] = self.frequency.get(word, 0) + delta

    def add(self, entry: Entry, n_keys: int) -> None:
        words = content_words(entry.text)
        keys = tuple(sorted(words, key=lambda w: (self.frequency[w], w))[:n_keys])
        self.words[entry.id], self.keys[entry.id] = words, keys
        for word in keys:
            self.postings.setdefault(word, set()).add(entry.id)

    def remove(self, entry_id: str) -> None:
        self.count(self.words.pop(entry_id, frozenset()), -1)
        for word in self.keys.pop(entry_id, ()):
            ids = self.postings[word]
            ids.discard(entry_id)
            if not ids:
                del self.postings[word]


def _keys_needed(m: int, ctx: StepContext) -> int:
    """m - k + 1 (see mention_candidates); 0 when no count of m words reaches the share."""
    share = ctx.memory.ai_mention_min_overlap
    k = next((c for c in range(1, m + 1) if c / m >= share), None)  # the match's own arithmetic
    return 0 if k is None else m - k + 1
