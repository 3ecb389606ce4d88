"""What an input record asks of its scope: the kind a step dispatches on, one member per record kind.

A kind's value is stored in scope state (queued inputs) and written on the control topics: never change one
once released. StrEnum members compare equal to their values, so a kind read back from state is one.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    TURN = "turn"
    FEEDBACK = "feedback"
    USAGE = "usage"
    # credence.control / credence.facts: an LLM answer, the timers, and the user's or operator's requests
    RESULT = "result"
    FAILED = "failed"
    TICK = "tick"
    FLUSH = "flush"
    FORGET = "forget"
    RESTORE = "restore"
    CONSENSUS = "consensus"
    DEDUPE = "dedupe"
    IMPORT = "import"
    ERASE = "erase"
    REMEMBER = "remember"
    EDIT = "edit"


# The kinds a control record's `type` can be, in the order the envelope lists them.
CONTROL_KINDS = (Kind.RESULT, Kind.FAILED, Kind.TICK, Kind.FLUSH, Kind.FORGET, Kind.RESTORE, Kind.CONSENSUS,
                 Kind.DEDUPE, Kind.IMPORT, Kind.ERASE, Kind.REMEMBER, Kind.EDIT)
ANSWERS = (Kind.RESULT, Kind.FAILED)  # LLM answers (control, facts): bounded by the runner at the record limit
# Control records that act on a scope's existing state: they never create a scope.
ACTS_ON_STATE = (Kind.RESULT, Kind.FAILED, Kind.TICK, Kind.FLUSH, Kind.RESTORE, Kind.CONSENSUS, Kind.DEDUPE, Kind.EDIT)
