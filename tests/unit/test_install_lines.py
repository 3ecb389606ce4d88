"""The distribution has a name we own (PyPI's `credence` is another project, which a resolver would pick for
`pip install 'credence[…]'`), and every install line in the docs and in the product's messages installs
from the checkout or names a third-party package: none asks PyPI for `credence`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("credence", "streams", "sinks", "config", "tables")
INSTALL = re.compile(r"pip install ([^`\n\"#]+)")


def install_lines() -> list[tuple[str, str]]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "Dockerfile", ROOT / ".ci" / "run"]
    files += [p for folder in SOURCES for p in sorted((ROOT / folder).rglob("*.py"))]
    return [(str(p.relative_to(ROOT)), m.group(1)) for p in files for m in INSTALL.finditer(p.read_text())]


def test_the_distribution_is_not_named_like_the_pypi_project_credence():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "credence-memory"
    assert project["scripts"]["credence"].startswith("credence.")  # the command and import package stay


def test_no_install_line_asks_pypi_for_credence():
    lines = install_lines()
    assert any("[tracing]" in args for _, args in lines)  # the scan sees the extras' lines
    for where, args in lines:
        command = re.split(r"&&|\|\||[;|)]", args)[0]  # what follows is another command
        targets = [t.strip("'\"") for t in command.split() if not t.startswith("-")]
        named = [t for t in targets if re.match(r"credence(\[|$)", t)]
        assert not named, f"{where}: `pip install {args}` installs PyPI's `credence`; install the checkout (-e .)"
