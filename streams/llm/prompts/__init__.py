"""The one prompt registry: every module of this package but `base` is a prompt (NAME, VERSION, SYSTEM,
Input/Output models, render_user, MAX_TOKENS, build, the rules backend's rules_answer), found here by name,
and most declare the task they serve (`TASK`; credence.streams.llm.tasks collects them). A new prompt is a
new module: nothing to list.

A prompt's NAME is its own (the key of CREDENCE_LLM__MODELS, the schema name a server sees): a task
(credence.streams.scope.tasks.TaskName) uses one prompt or more."""

import importlib
import pkgutil
from types import ModuleType


def _prompt_modules() -> list[ModuleType]:
    names = sorted(info.name for info in pkgutil.iter_modules(__path__) if info.name != "base")
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


PROMPTS: dict[str, ModuleType] = {module.NAME: module for module in _prompt_modules()}

__all__ = ["PROMPTS"]
