"""The state of one scope. The worker stores it split (streams/state/store.py): each entry under its own
key and everything else (the control part) as one small value, so a batch writes only what changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from credence.streams.scope.tasks import NOT_HOLDING, TaskName
from credence.tables.clock import format_instant, parse_instant
from credence.tables.entries import Entry
from credence.tables.recent import RecentLog

# Ids of processed facts remembered to drop a re-extracted duplicate; the facts themselves live on
# credence.facts and in the entries' source_fact_ids, not in the state (which is rewritten every step).
KEEP_PROCESSED_FACT_IDS = 500


@dataclass
class Request:
    """An LLM call the scope is waiting for. Results name it by id; unknown ids are stale and dropped."""

    id: str
    task: TaskName
    payload: dict
    issued_at: datetime  # event time of the step that issued it
    boot: str  # the worker run that issued it: another run's request was lost with that run
    failures: int = 0
    failed: bool = False  # the backend gave up (after its retries); re-issued on the next step
    # Past max_request_failures with the backend unavailable: waits until this event time (results.py).
    retry_at: datetime | None = None
    # A Stage-1 asked ahead of the window it predicts (speculation.py): it holds nothing, and its answer
    # (the result record, one window's facts) waits here until the scope asks for that window.
    speculative: bool = False
    answer: dict | None = None

    def to_dict(self) -> dict:
        return {"id": self.id, "task": self.task, "payload": self.payload,
                "issued_at": format_instant(self.issued_at), "boot": self.boot,
                "failures": self.failures, "failed": self.failed} | (
            {"retry_at": format_instant(self.retry_at)} if self.retry_at else {}) | (
            {"speculative": True} if self.speculative else {}) | (
            {"answer": self.answer} if self.answer is not None else {})

    @classmethod
    def from_dict(cls, d: dict) -> Request:
        return cls(id=d["id"], task=TaskName(d["task"]), payload=d["payload"], issued_at=parse_instant(d["issued_at"]),
                   boot=d["boot"], failures=d.get("failures", 0), failed=d.get("failed", False),
                   retry_at=parse_instant(d["retry_at"]) if d.get("retry_at") else None,
                   speculative=d.get("speculative", False), answer=d.get("answer"))


@dataclass
class ScopeState:
    scope: str
    clock: datetime | None = None  # latest event time seen; `now` never moves backwards
    entries: dict[str, Entry] = field(default_factory=dict)
    # Stage-1 window: turns waiting for extraction (a window never drops turns, however long it spans).
    buffer: list[dict] = field(default_factory=list)
    window_started_at: datetime | None = None
    # facts by id: {"fact": {...}, "stage2": "pending"|"done"|"skipped",
    #               "synthesis": "after_stage2"|"pending"|"done"|"none"}
    facts: dict[str, dict] = field(default_factory=dict)
    requests: dict[str, Request] = field(default_factory=dict)
    surfaced: list[str] = field(default_factory=list)  # reflections the last AI turn surfaced
    recent_user_messages: list[str] = field(default_factory=list)
    last_ai_text: str = ""  # the AI's last turn (tail): what a reply or rebuttal answers
    powerful: bool | None = None  # the switch as last seen by this scope
    switched_off_at: datetime | None = None
    last_sweep_at: datetime | None = None
    last_usage_sweep_at: datetime | None = None  # the daily usage-decay sweep, in event time
    applied: dict[str, int] = field(default_factory=dict)  # source topic -> last applied offset
    seq: int = 0  # request-id counter
    turns: int = 0  # distinct turns applied to this scope
    done_facts: list[str] = field(default_factory=list)
    # Inputs that arrived while an evidence request was in flight: a scope is processed in order, so
    # they wait here (in the changelogged state, never in memory) and run once the result is applied.
    queue: list[dict] = field(default_factory=list)
    # entry id -> the version it was archived at: a deterministic id that comes back (the same observation
    # synthesised again, its default persona id) continues that version line instead of reusing event ids.
    archived: dict[str, int] = field(default_factory=dict)
    # entry id -> {"at", "version", "by"}: entries the user deleted (streams/scope/erase.py). What was said
    # before "at" never brings one back (a replay of old turns); a later restatement is new evidence.
    erased: dict[str, dict] = field(default_factory=dict)
    # Grows whenever any entry of the scope changes (readers cache what they derive from the entries by it).
    entries_version: int = 0
    # Which life of the scope this is: 0 until its user is first forgotten, then set when the scope is
    # created again (streams/state/incarnations.py); every journal record carries it, so the journal's folds
    # tell a returning user's entries from the forgotten ones under the same deterministic ids.
    incarnation: int = 0
    # Correction work (streams/scope/corrections.py): promotions queued against the entry they correct,
    # oldest first: {"id", "target_id", "reflection_id", "asked"}.
    corrections: list[dict] = field(default_factory=list)
    # Refinement (scope/refine.py): when the last pass ran, in event time, and the clusters answered since
    # (cluster hash -> when), so an unchanged cluster is not asked again before its revisit time.
    last_refine_at: datetime | None = None
    refined: dict[str, str] = field(default_factory=dict)
    # The recent conversation: the newest turns and the memo of older ones (tables/recent.py), bounded.
    recent: RecentLog = field(default_factory=RecentLog)
    # The imports applied to this scope (streams/scope/imports.py), newest last: a re-sent one is a no-op.
    imports: list[str] = field(default_factory=list)
    # Recent turn id -> the entries its facts created, restated or signalled (turn_status.py, bounded).
    turn_entries: dict[str, list[str]] = field(default_factory=dict)
    # Not state: the reflections a score-transition pass found nothing to do for (step._quiet_marks), at
    # this instant or at any later one. Entries are immutable, so the same object gives the same answer;
    # a step re-checks only what changed and what time alone can move.
    quiet: dict = field(default_factory=dict, repr=False, compare=False)

    def touch(self, entry_id: str) -> None:
        """An entry was put or removed: every watcher (`watch`) sees its id."""
        for ids in self.quiet.get("touched", {}).values():
            ids.add(entry_id)

    def watch(self, name: str) -> set[str] | None:
        """The ids touched since watcher `name` last asked, taken; None the first time (it starts from every
        entry). A watcher is dropped with the scratch marks (`quiet`), e.g. when the state is loaded again."""
        touched = self.quiet.setdefault("touched", {})
        ids = touched.get(name)
        touched[name] = set()
        return ids

    def to_dict(self) -> dict[str, Any]:
        return self.control_dict() | {"entries": {k: e.to_dict() for k, e in self.entries.items()}}

    def control_dict(self) -> dict[str, Any]:
        """Every field but the entries (which are stored under their own keys)."""
        control = {
            "scope": self.scope, "clock": format_instant(self.clock),
            "buffer": self.buffer, "window_started_at": format_instant(self.window_started_at),
            "facts": self.facts, "requests": {k: r.to_dict() for k, r in self.requests.items()},
            "surfaced": self.surfaced, "recent_user_messages": self.recent_user_messages,
            "last_ai_text": self.last_ai_text,
            "powerful": self.powerful, "switched_off_at": format_instant(self.switched_off_at),
            "last_sweep_at": format_instant(self.last_sweep_at),
            "last_usage_sweep_at": format_instant(self.last_usage_sweep_at), "applied": self.applied, "seq": self.seq,
            "queue": self.queue, "turns": self.turns,
            "done_facts": self.done_facts, "archived": self.archived, "entries_version": self.entries_version,
        }
        # Added in place, in this order: a merge per optional field copied the whole value once more per step.
        if self.incarnation:
            control["incarnation"] = self.incarnation
        if self.corrections:
            control["corrections"] = self.corrections
        if self.last_refine_at:
            control["last_refine_at"], control["refined"] = format_instant(self.last_refine_at), self.refined
        if not self.recent.empty:
            control["recent"] = self.recent.to_dict()
        if self.imports:
            control["imports"] = self.imports
        if self.erased:
            control["erased"] = self.erased
        if self.turn_entries:
            control["turn_entries"] = self.turn_entries
        return control

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScopeState:
        return cls(
            scope=d["scope"], clock=parse_instant(d.get("clock")),
            entries={k: Entry.from_dict(v) for k, v in d.get("entries", {}).items()},
            buffer=list(d.get("buffer", [])), window_started_at=parse_instant(d.get("window_started_at")),
            # fresh status dicts: steps mutate them, and the stored value must stay as it was if a step fails
            facts={k: dict(v) for k, v in d.get("facts", {}).items()},
            requests={k: Request.from_dict(v) for k, v in d.get("requests", {}).items()},
            surfaced=list(d.get("surfaced", [])), recent_user_messages=list(d.get("recent_user_messages", [])),
            last_ai_text=d.get("last_ai_text", ""),
            powerful=d.get("powerful"), switched_off_at=parse_instant(d.get("switched_off_at")),
            last_sweep_at=parse_instant(d.get("last_sweep_at")),
            last_usage_sweep_at=parse_instant(d.get("last_usage_sweep_at")), applied=dict(d.get("applied", {})),
            seq=d.get("seq", 0), queue=list(d.get("queue", [])), turns=d.get("turns", 0),
            done_facts=list(d.get("done_facts", [])),
            archived=dict(d.get("archived", {})), entries_version=d.get("entries_version", 0),
            incarnation=d.get("incarnation", 0),
            corrections=[dict(c) for c in d.get("corrections", [])],
            last_refine_at=parse_instant(d.get("last_refine_at")), refined=dict(d.get("refined", {})),
            recent=RecentLog.from_dict(d.get("recent")),
            imports=list(d.get("imports", [])),
            erased={k: dict(v) for k, v in d.get("erased", {}).items()},
            turn_entries={k: list(v) for k, v in d.get("turn_entries", {}).items()},
        )

    def next_id(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}-{self.seq}"

    def pending_tasks(self, task: TaskName) -> list[Request]:
        return [r for r in self.requests.values() if r.task == task]

    @property
    def blocked(self) -> bool:
        """An evidence request is in flight: later inputs of this scope wait (in the state) so the outcome
        never depends on LLM latency — replays, duplicates and crashes end in the same state. Promotion
        never holds the scope (the seed runs it outside the per-character lock): a denial or archive
        transition that lands meanwhile wins through the version check on the promotion's result; nor does
        a summary of the recent conversation (its head check, tables/recent.py). A speculative Stage-1
        holds nothing either: nothing of it is applied until the scope asks for it."""
        return any(r.task not in NOT_HOLDING and not r.speculative for r in self.requests.values())

    @property
    def idle(self) -> bool:
        return not self.requests and not self.queue and not self.buffer

    def trim_facts(self) -> None:
        """Move facts with no work left out of the state, keeping only their ids."""
        done = [k for k, f in self.facts.items()
                if f["stage2"] != "pending" and f["synthesis"] not in ("pending", "after_stage2")]
        for key in done:
            del self.facts[key]
        self.done_facts = (self.done_facts + done)[-KEEP_PROCESSED_FACT_IDS:]

    def knows_fact(self, fact_id: str) -> bool:
        return fact_id in self.facts or fact_id in self.done_facts
