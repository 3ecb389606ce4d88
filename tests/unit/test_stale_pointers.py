"""Product text points only at what the repository holds: every `.md` page a module names exists in it, and
no module names a file on one machine (`/work/…`, `/home/…`)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("credence", "config", "tables", "streams", "sinks", "benchmarks")
PAGE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
MACHINE = re.compile(r"(?<![\w.])/(?:work|home|root|Users)/[\w./-]+")


def stale_pointers(sources: dict[str, str], pages: set[str]) -> list[str]:
    names = {Path(path).name for path in pages}
    found = []
    for module, text in sources.items():
        for match in PAGE.finditer(text):
            page = match.group(1)
            if page not in pages and Path(page).name not in names:
                found.append(f"{module}: {page}")
        found += [f"{module}: {match.group(0).rstrip('.')}" for match in MACHINE.finditer(text)]
    return sorted(found)


def test_no_product_module_points_at_a_page_the_repository_lacks():
    folders = [ROOT / name for name in (*PRODUCT, "docs", "tests")]
    pages = {str(p.relative_to(ROOT)) for p in [*ROOT.glob("*.md"), *(q for f in folders for q in f.rglob("*.md"))]}
    sources = {str(path.relative_to(ROOT)): path.read_text()
               for path in sorted(q for name in PRODUCT for q in (ROOT / name).rglob("*.py"))}
    assert stale_pointers(sources, pages) == []


def test_the_finder_names_a_missing_page_and_a_machine_path():
    sources = {"a.py": '"""See docs/state.md and PRODUCT.md, or /work/shared/NOTES.md."""'}
    assert stale_pointers(sources, {"docs/state.md"}) == ["a.py: /work/shared/NOTES.md", "a.py: PRODUCT.md"]
