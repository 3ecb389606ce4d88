"""One composition root (streams/ops/worker.py) builds a worker's parts in order and hands each its
collaborators when it is built: no product module sets an attribute of the worker's container or of its
agent or runner afterwards (only the container's counters move while the worker runs)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("streams", "sinks", "config", "tables", "credence")
PARTS = {"credence", "agent", "runner", "handlers"}  # the container and the parts wired into it
COUNTERS = "credence.stats."


def assigned(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            yield node.lineno, from_tuple(target)


def from_tuple(target: ast.expr):
    return target.elts if isinstance(target, ast.Tuple) else [target]


def patches() -> list[str]:
    found = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, targets in assigned(ast.parse(path.read_text(), str(path))):
                for target in targets:
                    base = target
                    while isinstance(base, ast.Attribute):
                        base = base.value
                    text = ast.unparse(target)
                    if (isinstance(target, ast.Attribute) and isinstance(base, ast.Name) and base.id in PARTS
                            and not text.startswith(COUNTERS)):
                        found.append(f"{path.relative_to(ROOT)}:{line}: {text} = ...")
    return found


def test_no_module_patches_the_workers_parts_after_they_are_built():
    assert patches() == []
