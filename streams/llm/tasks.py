"""The pipeline's LLM tasks by name: each prompt module's `TASK` (its payload, how it runs through a
backend's generic call, the output it answers with), collected from the one prompt registry. The scope's
side of each task (its payload builder and result handler) is bound to the same `TaskName` in
credence.streams.scope.results.SCOPE_TASKS; a unit test holds the two together.

A task is called by its `TaskName`. Two other names it meets are not the task's: a prompt's NAME (the key
of CREDENCE_LLM__MODELS and the schema name a server sees) and the keys of what is stored (an output's
"drafts", the model's "reflections"), which old records carry and so stay as they are."""

from __future__ import annotations

from dataclasses import replace

from credence.streams.llm.prompts import PROMPTS
from credence.streams.llm.prompts.base import Rank, Task
from credence.streams.scope.tasks import TaskName


def _collect() -> dict[TaskName, Task]:
    tasks: dict[TaskName, Task] = {}
    for module in PROMPTS.values():
        task = getattr(module, "TASK", None)
        if task is not None:
            tasks[task.name] = replace(task, prompts=(module, *(PROMPTS[name] for name in task.also)))
    return tasks


TASKS: dict[TaskName, Task] = _collect()

__all__ = ["TASKS", "Rank", "Task"]
