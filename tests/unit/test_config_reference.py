"""Every settings field is in the configuration reference, under the environment variable that sets it
(CREDENCE_<FIELD>, nested sections joined by `__`), with its default and a description: the reference is
generated from the model when the site is built (docs/hooks/reference.py), so it cannot miss a field, and a
field nobody explained (no comment in config/, no hand-written row) fails here. The hand-written docs name no
setting that does not exist: a renamed or removed field leaves no stale variable behind."""

from __future__ import annotations

import re

from pydantic import BaseModel

from credence.config import Settings
from tests.support.readme_blocks import documentation, reference_generator

settings_reference, walk = reference_generator().settings_reference, reference_generator().walk

# CREDENCE_ variables the docs name that are not settings: the demo's printed exports, docker-compose's model,
# a benchmark's knob and the fault suite's size.
NOT_SETTINGS = {"CREDENCE_URL", "CREDENCE_KEY", "CREDENCE_LLM_MODEL", "CREDENCE_BENCH_LLM_DELAY",
                "CREDENCE_FAULTS_SIZE"}


def env_names(model: type[BaseModel], prefix: str = "CREDENCE_") -> list[str]:
    """The walk written independently of the generator's, so a generator that skips a field is caught."""
    names = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            names += env_names(field.annotation, f"{prefix}{name.upper()}__")
        else:
            names.append(f"{prefix}{name.upper()}")
    return names


def reference_rows() -> dict[str, list[str]]:
    """variable -> its cells (type, default, description) in the generated reference."""
    rows = {}
    for line in settings_reference().splitlines():
        if line.startswith("| `CREDENCE_"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_walk_finds_nested_fields():
    names = env_names(Settings)
    assert {"CREDENCE_KAFKA_BOOTSTRAP", "CREDENCE_ARCHIVE__GROUP_ID", "CREDENCE_LLM__MODEL"} <= set(names)
    assert [s.env for s in walk(Settings)] == names


def test_every_settings_field_is_in_the_generated_reference_with_default_and_description():
    rows = reference_rows()
    assert set(rows) == set(env_names(Settings))
    assert rows["CREDENCE_TOPIC_PARTITIONS"][1] == "`4`"
    assert rows["CREDENCE_ARCHIVE__GROUP_ID"][1] == "`credence-sink`"
    assert rows["CREDENCE_KAFKA_BOOTSTRAP"][1] == "*(empty)*"
    unexplained = [env for env, cells in rows.items() if not cells[2]]
    assert not unexplained, ("settings with no description: comment the field in config/ or add a row to "
                             f"docs/configuration.md: {', '.join(unexplained)}")


def named_settings(text: str) -> set[str]:
    """The CREDENCE_ variables a text names; `CREDENCE_X__*` and `CREDENCE_X__S3_*` as their prefix."""
    return set(re.findall(r"CREDENCE_[A-Z0-9_]+", text))


def exists(name: str, envs: set[str]) -> bool:
    if name in envs or name in NOT_SETTINGS:
        return True
    return name.endswith("_") and any(env.startswith(name) for env in envs)


def test_the_hand_written_docs_name_no_setting_that_does_not_exist():
    envs = set(env_names(Settings))
    stale = sorted({f"{path.name}: {name}" for path in documentation() for name in named_settings(path.read_text())
                    if not exists(name, envs)})
    assert not stale, f"the docs name settings that do not exist: {stale}"


def test_a_stale_name_is_caught():
    envs = set(env_names(Settings))
    assert not exists("CREDENCE_ARCHIVE__BUCKET", envs)
    assert not exists("CREDENCE_NOPE__", envs)
    assert named_settings("`CREDENCE_ARCHIVE__S3_*` and `CREDENCE_KAFKA__*`, CREDENCE_LLM__MODEL=x") == {
        "CREDENCE_ARCHIVE__S3_", "CREDENCE_KAFKA__", "CREDENCE_LLM__MODEL"}
