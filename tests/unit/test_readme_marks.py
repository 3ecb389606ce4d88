"""The marks that make README and docs blocks runnable (tests/integration/test_readme_blocks.py runs them): each
opens a block the suite can run, the copy-paste starts that can run here are marked, and the runner reads every
page of the site in the order a reader meets it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.readme_blocks import (
    MARK,
    ROOT,
    all_runnable_blocks,
    documentation,
    nav_pages,
    reads_the_archive,
    runnable_blocks,
)


def test_the_docs_runnable_starts_are_marked():
    blocks = all_runnable_blocks()
    codes = "".join(b.code for b in blocks)
    assert "credence replay streams/ops/data/sample_turns.jsonl --flush" in codes
    assert "credence sink --drain" in codes and "FROM archive WHERE archived_at" in codes
    assert any(reads_the_archive(b) for b in blocks)
    # the archive is drained from the replay's journal: the replay's block must come first
    first_replay = next(i for i, b in enumerate(blocks) if "credence replay" in b.code)
    assert first_replay < next(i for i, b in enumerate(blocks) if reads_the_archive(b))


def test_the_runner_reads_every_hand_written_page_of_the_site():
    """A page left out of the nav would hold blocks nobody runs (and mkdocs --strict refuses it too)."""
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")
               if "hooks" not in p.relative_to(ROOT / "docs").parts}
    assert on_disk <= set(nav_pages()), f"pages missing from mkdocs.yml's nav: {sorted(on_disk - set(nav_pages()))}"
    read = documentation()
    assert read[0] == ROOT / "README.md"
    assert {str(p.relative_to(ROOT / "docs")) for p in read[1:]} == on_disk


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


def test_pages_are_read_in_nav_order(tmp_path):
    (tmp_path / "docs" / "ops").mkdir(parents=True)
    (tmp_path / "README.md").write_text(f"{MARK}\n```bash\necho readme\n```\n")
    for page in ("a.md", "ops/b.md"):
        (tmp_path / "docs" / page).write_text(f"{MARK}\n```bash\necho {page}\n```\n")
    (tmp_path / "mkdocs.yml").write_text("nav:\n  - B: ops/b.md\n  - Ref: reference/generated.md\n  - A: a.md\n")
    assert [b.code for b in all_runnable_blocks(tmp_path)] == ["echo readme\n", "echo ops/b.md\n", "echo a.md\n"]
    assert Path(all_runnable_blocks(tmp_path)[1].source).name == "b.md"


def test_the_readme_stays_short_and_opens_with_the_two_commands():
    """A newcomer reads it in five minutes: at most 200 lines, everything else on the site, and its
    first code block is the two commands, exactly."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200, "the README grew past 200 lines: move the detail into docs/"
    first_block = text[text.index("```"):].split("```", 2)[1]
    assert first_block == ("bash\npython3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/credence demo\n"
                           "bash .ci/run\n")
