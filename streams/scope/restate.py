"""Never twice, inside a scope step: which stored or just-written statement a new one restates
(tables.statement.restates on the rules backend's content stems, thresholds from the memory settings),
and the self-containment gate every Stage-1 fact and every synthesised reflection passes through."""

from __future__ import annotations

from collections.abc import Iterable

from credence.config.memory import MemorySettings
from credence.streams.scope.context import StepContext
from credence.streams.scope.requests import OPEN_REFLECTION_STATUSES
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.entries import Entry
from credence.tables.statement import is_self_contained, restates
from credence.tables.text import polarity_of, restatement_stems


def same_statement(a: str, b: str, settings: MemorySettings) -> bool:
    """Whether two statements say the same thing: a predicate kind in common ("lives in Montreal" is not
    "likes Montreal"; "has a dog" is "has a dog named Rex") and their content stems overlapping by tables.statement.restates."""
    (kind_a, stems_a), (kind_b, stems_b) = _split(a), _split(b)
    if (kind_a != kind_b and not kind_a & kind_b) or not stems_a or not stems_b:
        return False  # a predicate alone ("The user loves it.") says nothing to compare
    return restates(stems_a, stems_b, polarity_of(a) == polarity_of(b),
                    jaccard=settings.restatement_jaccard,
                    containment_min=settings.restatement_containment_min_stems)


def _split(text: str) -> tuple[frozenset[str], frozenset[str]]:
    stems = restatement_stems(text)
    kinds = frozenset(s for s in stems if s.startswith("@"))
    return kinds, stems - kinds


def richer(a: str, b: str) -> str:
    """Of two restatements, the one that says more: the second only when it says all the first does and
    more (its content stems a strict superset), so a rewording never replaces a stored text."""
    return b if restatement_stems(a) < restatement_stems(b) else a


def live_statements(state: ScopeState) -> list[Entry]:
    """What the scope currently holds as true: active persona entries and open reflections."""
    return [e for e in state.entries.values() if _is_live(e)]


def _is_live(e: Entry) -> bool:
    return (e.kind == "persona" and e.status == "active") or (
        e.kind == "reflection" and e.status in OPEN_REFLECTION_STATUSES)


def live(state: ScopeState, entry_id: str | None) -> Entry | None:
    """The entry of that id when it is one of the scope's live statements."""
    entry = state.entries.get(entry_id or "")
    return entry if entry is not None and _is_live(entry) else None


def restated_by(text: str, entries: Iterable[Entry], settings: MemorySettings) -> Entry | None:
    return next((e for e in sorted(entries, key=lambda e: e.id) if same_statement(text, e.text, settings)), None)


def admit(ctx: StepContext, stage: TaskName, text: str) -> bool:
    """Whether a text the `stage` task answered may become a fact or an entry; a refusal is logged and
    counted by task and reason."""
    ok, reason = is_self_contained(text)
    if not ok:
        ctx.refuse(stage, reason, text)
    return ok
