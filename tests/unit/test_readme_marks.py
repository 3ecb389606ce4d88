"""The marks that make README blocks runnable (tests/integration/test_readme_blocks.py runs them): each opens a
block the suite can run, and the copy-paste starts that can run here are marked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.readme_blocks import MARK, reads_the_archive, runnable_blocks

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_runnable_starts_are_marked():
    blocks = runnable_blocks(README)
    codes = "".join(b.code for b in blocks)
    assert "credence replay streams/ops/data/sample_turns.jsonl --flush" in codes
    assert "credence sink --drain" in codes and "FROM archive WHERE archived_at" in codes
    assert any(reads_the_archive(b) for b in blocks)


@pytest.mark.parametrize(("text", "error"), [
    (f"{MARK}\n\nsome prose\n", "not followed by a fenced block"),
    (f"{MARK}\n```text\nx\n```\n", "must be one of"),
    (f"{MARK}\n```bash\necho never closed\n", "never closed"),
])
def test_a_mark_that_would_test_nothing_is_an_error(tmp_path, text, error):
    path = tmp_path / "README.md"
    path.write_text(text)
    with pytest.raises(ValueError, match=error):
        runnable_blocks(path)


def test_blocks_come_in_document_order_with_their_fence_line(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"# t\n{MARK}\n```bash\necho one\n```\n```bash\nnot marked\n```\n{MARK}\n```sql\nSELECT 1\n```\n")
    assert [(b.line, b.language, b.code) for b in runnable_blocks(path)] == [
        (3, "bash", "echo one\n"), (10, "sql", "SELECT 1\n")]
