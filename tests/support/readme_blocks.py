"""The copy-paste starts of the README and the docs site, as the suite runs them: fenced blocks marked by a line
`<!-- runnable -->` right before their opening fence, read in the order a newcomer meets them (the README, then
the site's pages in mkdocs.yml's nav order)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

MARK = "<!-- runnable -->"
RUNNABLE_LANGUAGES = ("bash", "sh", "sql", "python")
FENCE = re.compile(r"^```(\w*)\s*$")
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    source: str = "README.md"

    def __str__(self) -> str:
        return f"{self.source}:{self.line} ({self.language})"


def runnable_blocks(path: Path) -> list[Block]:
    """Every marked block in document order. A mark not followed by a fence, a block never closed or a
    language the suite cannot run is an error: the mark would otherwise test nothing."""
    lines = path.read_text().splitlines()
    source = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        opening = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if opening is None:
            raise ValueError(f"{path.name}:{i + 1}: {MARK} is not followed by a fenced block")
        language = opening.group(1)
        if language not in RUNNABLE_LANGUAGES:
            raise ValueError(f"{path.name}:{i + 2}: a runnable block must be one of {RUNNABLE_LANGUAGES}, not "
                             f"{language!r}")
        try:
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        except StopIteration:
            raise ValueError(f"{path.name}:{i + 2}: the runnable block is never closed") from None
        blocks.append(Block(i + 2, language, "\n".join(lines[i + 2:end]) + "\n", source))
    return blocks


def nav_pages(root: Path = ROOT) -> list[str]:
    """The site's pages (paths under docs/) in mkdocs.yml's nav order."""
    def walk(node) -> list[str]:
        if isinstance(node, str):
            return [node] if node.endswith(".md") else []
        if isinstance(node, list):
            return [page for item in node for page in walk(item)]
        if isinstance(node, dict):
            return [page for value in node.values() for page in walk(value)]
        return []
    return walk(yaml.safe_load((root / "mkdocs.yml").read_text())["nav"])


def documentation(root: Path = ROOT) -> list[Path]:
    """The hand-written documentation in reading order: the README, then every site page on disk (the generated
    reference pages exist only in the build)."""
    pages = [root / "docs" / page for page in nav_pages(root)]
    return [root / "README.md", *(p for p in pages if p.exists())]


def all_runnable_blocks(root: Path = ROOT) -> list[Block]:
    return [block for path in documentation(root) for block in runnable_blocks(path)]


def reads_the_archive(block: Block) -> bool:
    return block.language == "sql" or "credence archive " in block.code


def reference_generator():
    """The site's generator of reference pages (docs/hooks/reference.py, a mkdocs hook and no package of ours),
    loaded from its file: `docs` is no import root, and a stray `docs` package installed in the venv could win."""
    import importlib.util
    import sys

    name = "credence_docs_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "hooks" / "reference.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
    return sys.modules[name]
