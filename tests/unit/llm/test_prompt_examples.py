"""The worked examples of the prompts that write memories teach the rule the shared gate enforces:
every text in their OUTPUT lines is self-contained, and the rule is stated in the prefix."""

from __future__ import annotations

import json

import pytest

from credence.streams.llm.prompts import reflection_synthesis, stage1_extraction
from credence.tables.statement import is_self_contained


def _output_texts(system: str) -> list[str]:
    texts = []
    for line in system.splitlines():
        if line.startswith("OUTPUT: "):
            out = json.loads(line[len("OUTPUT: "):])
            texts += [item["text"] for items in out.values() for item in items]
    return texts


@pytest.mark.parametrize("module", [stage1_extraction, reflection_synthesis])
def test_every_worked_example_writes_self_contained_texts(module):
    texts = _output_texts(module.SYSTEM)
    assert len(texts) >= 4
    for text in texts:
        assert is_self_contained(text) == (True, ""), text
    assert "never first person" in module.SYSTEM and '"it", "them", "this", "that"' in module.SYSTEM
