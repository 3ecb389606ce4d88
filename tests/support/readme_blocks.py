"""The README's copy-paste starts, as the suite runs them: fenced blocks marked by a line `<!-- runnable -->`
right before their opening fence."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARK = "<!-- runnable -->"
RUNNABLE_LANGUAGES = ("bash", "sh", "sql", "python")
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    code: str

    def __str__(self) -> str:
        return f"README.md:{self.line} ({self.language})"


def runnable_blocks(path: Path) -> list[Block]:
    """Every marked block in document order. A mark not followed by a fence, a block never closed or a
    language the suite cannot run is an error: the mark would otherwise test nothing."""
    lines = path.read_text().splitlines()
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
        blocks.append(Block(i + 2, language, "\n".join(lines[i + 2:end]) + "\n"))
    return blocks


def reads_the_archive(block: Block) -> bool:
    return block.language == "sql" or "credence archive " in block.code
