"""Every settings field is in the README's configuration reference, under the environment variable that sets
it (CREDENCE_<FIELD>, nested sections joined by `__`): a setting nobody can find is one nobody can change."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from credence.config import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def env_names(model: type[BaseModel], prefix: str = "CREDENCE_") -> list[str]:
    names = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            names += env_names(field.annotation, f"{prefix}{name.upper()}__")
        else:
            names.append(f"{prefix}{name.upper()}")
    return names


def reference_rows() -> list[str]:
    """The rows of the README's tables that document variables (first cell names a CREDENCE_ variable)."""
    return [line for line in README.read_text().splitlines() if line.startswith("| `CREDENCE_")]


def documented(env: str, rows: list[str]) -> bool:
    """Named in full in a row's first cell; or as `__LEAF` beside a sibling of its section there
    (`CREDENCE_LLM__TIMEOUT_S` / `__MAX_RETRIES`); or as `LEAF` in a section's `CREDENCE_X__*` row."""
    section, _, leaf = env.rpartition("__")
    for row in rows:
        first = row.split("|")[1]
        if f"`{env}`" in first:
            return True
        if section and f"`{section}__" in first and f"`__{leaf}`" in first:
            return True
        if section and f"`{section}__*`" in first and re.search(rf"`{leaf}`", row):
            return True
    return False


def test_the_walk_finds_nested_fields():
    names = env_names(Settings)
    assert {"CREDENCE_KAFKA_BOOTSTRAP", "CREDENCE_ARCHIVE__GROUP_ID", "CREDENCE_LLM__MODEL"} <= set(names)


def test_every_settings_field_is_in_the_configuration_reference():
    rows = reference_rows()
    missing = [env for env in env_names(Settings) if not documented(env, rows)]
    assert not missing, ("settings missing from the README's configuration reference (add a row to "
                         f"\"Configuration\"): {', '.join(missing)}")
