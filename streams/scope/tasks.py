"""The LLM tasks a scope asks for, by name: the domain's vocabulary for its requests. The LLM layer above
runs each name (credence.streams.llm.tasks); the scope builds and applies it (results.SCOPE_TASKS)."""

from __future__ import annotations

from enum import StrEnum


class TaskName(StrEnum):
    """The name a request carries. The values are stored in scope state (requests and their ids) and on
    the result topics, so they never change: a request saved by an older worker reads back as its member."""

    STAGE1 = "stage1"
    STAGE2 = "stage2"
    SYNTHESIS = "synthesis"
    FEEDBACK = "feedback"
    TARGET = "target"
    PROMOTION = "promotion"
    # -- correction work --
    CORRECTION = "correction"
    REFINE = "refine"
    SUMMARISE = "summarise"  # the recent conversation's rolling memo


# Tasks whose requests never hold the scope (ScopeState.blocked): their results are applied only if what
# they were asked about is still current (a promotion's ticket, a summary's head).
NOT_HOLDING = (TaskName.PROMOTION, TaskName.SUMMARISE)
