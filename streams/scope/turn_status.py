"""How far a turn has come in its scope: accepted -> applied -> extracted.

Read from what the scope keeps anyway, so the stream writes nothing more per turn: the owner's applied
offset on the turns topic (`ScopeState.applied`), the inputs queued behind an evidence request, the open
Stage-1 window (`buffer`), the Stage-1 requests in flight and the facts with work left. The one thing the
state keeps for this alone is which entries a recent turn's facts touched (`turn_entries`): only turns whose
facts reached an entry, at most KEEP_TURN_ENTRIES of them, changed only when an LLM result is applied.
"""

from __future__ import annotations

from credence.records.kind import Kind
from credence.streams.scope.scope_state import ScopeState
from credence.streams.scope.tasks import TaskName
from credence.tables.tags import union

ACCEPTED, APPLIED, EXTRACTED = "accepted", "applied", "extracted"
STATES = (ACCEPTED, APPLIED, EXTRACTED)
WAITS = (APPLIED, EXTRACTED)  # what `?wait=` may ask for
KEEP_TURN_ENTRIES = 16  # recent turns whose touched entries the scope remembers (inline in its control value)
MAX_ENTRIES_PER_TURN = 8
PENDING_SYNTHESIS = ("pending", "after_stage2")


def turns_position(partition: int) -> str:
    """The key of the turns topic's partition in `ScopeState.applied` (the agent's `position`)."""
    return f"turns:{partition}"


def touched(state: ScopeState, fact: dict, entry_id: str) -> None:
    """An entry was created, restated or signalled from `fact`: remember it for each turn the fact cites."""
    for turn_id in fact.get("source_turn_ids", []):
        ids = state.turn_entries.get(turn_id)
        if ids is None:
            ids = state.turn_entries[turn_id] = []
            while len(state.turn_entries) > KEEP_TURN_ENTRIES:
                del state.turn_entries[next(iter(state.turn_entries))]
        if entry_id not in ids and len(ids) < MAX_ENTRIES_PER_TURN:
            ids.append(entry_id)


def touched_by(state: ScopeState, facts: list[dict], entry_id: str) -> None:
    """The turns these facts came from touched the entry (the state's copy of a fact names them)."""
    for fact in facts:
        touched(state, state.facts.get(fact["id"], {}).get("fact", fact), entry_id)


def tags_of(state: ScopeState, facts: list[dict]) -> tuple[str, ...]:
    """The tags of the turns these facts came from (kept beside each fact in the state)."""
    return union(*(state.facts.get(f["id"], {}).get("tags", ()) for f in facts))


def queued_turn(state: ScopeState, turn_id: str | None = None) -> bool:
    """A turn (this one, or any when None) waits in the queue behind an evidence request."""
    return any(item["kind"] == Kind.TURN and (turn_id is None or item["record"].get("turn_id") == turn_id)
               for item in state.queue)


def _extracting(state: ScopeState, turn_id: str | None) -> bool:
    """The turn (any, when None) still waits for its window to close, its Stage-1 answer, or its facts'
    Stage-2 and synthesis."""
    if any(turn_id is None or t["id"] == turn_id for t in state.buffer):
        return True
    for req in state.requests.values():
        if req.task == TaskName.STAGE1 and any(turn_id is None or t["id"] == turn_id
                                               for t in req.payload.get("turns", [])):
            return True
    for item in state.facts.values():
        busy = item["stage2"] == "pending" or item["synthesis"] in PENDING_SYNTHESIS
        if busy and (turn_id is None or turn_id in item["fact"].get("source_turn_ids", [])):
            return True
    return False


def reached(state: ScopeState | None, partition: int, offset: int, wait: str, partition_next: int | None = None) -> bool:
    """Whether the scope's owner has reached the token's turns up to `offset` of `partition`: APPLIED when
    it applied the partition past them (`partition_next`: the next offset the owner will apply there; the
    scope's own applied offset counts too) and no turn waits in the scope's queue; EXTRACTED when, besides,
    no turn of the scope waits for extraction. Turns carry no offsets in the state, so a later turn still in
    the open window holds an EXTRACTED wait too (never a false yes)."""
    past = partition_next is not None and partition_next > offset
    if state is None:
        return past  # the partition went past the token and this scope has nothing of it
    if not (past or state.applied.get(turns_position(partition), -1) >= offset) or queued_turn(state):
        return False
    return wait == APPLIED or not _extracting(state, None)


def turn_state(state: ScopeState, turn_id: str, partition: int, offset: int) -> str:
    """The state of the turn first carried at `offset` of `partition` (its duplicate mark's position)."""
    if state.applied.get(turns_position(partition), -1) < offset or queued_turn(state, turn_id):
        return ACCEPTED
    return APPLIED if _extracting(state, turn_id) else EXTRACTED


def at_least(have: str, want: str) -> bool:
    return STATES.index(have) >= STATES.index(want)
