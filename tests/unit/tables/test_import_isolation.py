"""tables/ is the pure domain: it must import nothing of Kafka, HTTP, Arrow or DuckDB."""

import ast
import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("faust", "aiokafka", "kafka", "httpx", "pyarrow", "duckdb", "mode", "credence.streams", "credence.sinks")
TABLES_DIR = Path(__file__).resolve().parents[3] / "tables"


def test_importing_credence_tables_loads_no_forbidden_module():
    code = (
        "import sys, credence.tables, credence.tables.rendering, credence.tables.fallback\n"
        "from credence.tables.tokens import default_token_counter\n"
        "default_token_counter()('hello')\n"
        f"bad = sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in {FORBIDDEN!r}))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_module_in_tables_imports_a_forbidden_package():
    files = sorted(TABLES_DIR.rglob("*.py"))
    assert files, f"no sources found under {TABLES_DIR}"
    offenders = {
        f"{path.name}: {name}"
        for path in files
        for name in _imported_modules(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    }
    assert offenders == set()


def test_domain_code_reads_no_clock():
    paths = sorted(TABLES_DIR.rglob("*.py"))
    assert paths, TABLES_DIR  # else the loop checks nothing
    for path in paths:
        source = path.read_text()
        for call in (".now(", ".utcnow(", "time.time(", ".today(", "monotonic("):
            assert call not in source, f"{path.name} reads the clock via {call}"
