"""The house rules a reader can rely on: imports run downhill in the layer order of docs/architecture.md,
no product module takes part in an import cycle, and the pure domain (streams/scope/, tables/) reaches
nothing that does I/O or talks to Kafka, whatever path the imports take.

The imports are read from the source with `ast`, imports inside functions included: a lazy import is a
dependency all the same, only paid later.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# Folder -> import name, as pyproject.toml's package-dir installs them.
FOLDERS = {"credence": "credence", "config": "credence.config", "tables": "credence.tables",
           "streams": "credence.streams", "sinks": "credence.sinks"}
LAYER_BLOCK = re.compile(r"<!-- layer order[^>]*-->\s*```text\n(.*?)```", re.S)

# What the pure domain must never reach: Kafka and the stream framework, the network, files and the
# environment, the clock, other processes, threads and event loops, and the services that export or serve.
IO_ROOTS = frozenset({
    "faust", "mode", "aiokafka", "kafka", "httpx", "httpcore", "h11", "anyio", "aiohttp", "requests", "urllib3",
    "mcp", "starlette", "uvicorn", "openai", "pyarrow", "duckdb", "rocksdict", "boto3", "botocore", "fsspec",
    "socket", "ssl", "selectors", "asyncio", "subprocess", "multiprocessing", "concurrent", "threading",
    "http", "urllib", "sqlite3", "shutil", "tempfile", "os", "time", "opentelemetry", "prometheus_client", "matplotlib",
    "sentence_transformers", "torch", "transformers", "huggingface_hub", "tenacity",
})
PURE = ("credence.streams.scope", "credence.tables")


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a product module, or the top-level name of anything else
    line: int
    lazy: bool  # inside a function, or only for type checkers: not run when the importer is imported


def product_modules() -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


MODULES = product_modules()


def _target(name: str) -> str:
    """The product module an import of ``name`` names (its deepest existing prefix), or the top-level
    name of a third-party or standard module."""
    if not name.startswith("credence"):
        return name.split(".")[0]
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _from_names(module: str, node: ast.ImportFrom) -> Iterator[str]:
    base = node.module or ""
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rsplit(".", 1)[0]
        package = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{package}.{base}" if base else package
    for alias in node.names:  # `from package import module` names the module itself
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _dynamic_name(node: ast.Call) -> str | None:
    """``__import__("x")`` / ``importlib.import_module(f"x.{name}")``: the constant part of the name."""
    func = node.func
    called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if called not in ("__import__", "import_module") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")
    return None


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str) -> list[Import]:
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_type_checking(child)
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                names = list(_from_names(module, child))
            elif isinstance(child, ast.Call) and (dynamic := _dynamic_name(child)):
                names = [dynamic]
            found.extend(Import(module, _target(n), child.lineno, inner) for n in names)
            visit(child, inner)

    path = MODULES[module]
    visit(ast.parse(path.read_text(), filename=str(path)), False)
    return found


IMPORTS = {module: imports_of(module) for module in MODULES}


def layers() -> list[list[tuple[str, tuple[str, ...]]]]:
    """docs/architecture.md's layer order, top first: each layer a list of (component, module prefixes);
    the components of one layer are peers."""
    match = LAYER_BLOCK.search(ARCHITECTURE.read_text())
    assert match, f"{ARCHITECTURE} has no layer block (a ```text block after '<!-- layer order -->')"
    order = []
    for line in match.group(1).strip().splitlines():
        order.append([(words[0], tuple(words[1:])) for words in (part.split() for part in line.split("|"))])
    return order


def placement() -> dict[str, tuple[int, str]]:
    """Every product module's (rank, component): the component whose prefix names it most closely; the
    top layer has rank 0."""
    prefixes = {prefix: (rank, name) for rank, layer in enumerate(layers()) for name, mods in layer for prefix in mods}
    placed = {}
    for module in MODULES:
        best = max((p for p in prefixes if module == p or module.startswith(p + ".")), key=len, default=None)
        assert best is not None, f"{module} is in no layer of {ARCHITECTURE.name}: add it to the layer block"
        placed[module] = prefixes[best]
    return placed


def test_the_layer_block_names_every_product_module_once():
    listed = [prefix for layer in layers() for _, mods in layer for prefix in mods]
    assert len(listed) == len(set(listed)), f"a module prefix is listed twice: {sorted(listed)}"
    unknown = [prefix for prefix in listed if prefix not in MODULES]
    assert unknown == [], f"{ARCHITECTURE.name} names modules that do not exist: {unknown}"
    assert len(placement()) == len(MODULES)


def test_imports_run_downhill_in_the_layer_order():
    placed = placement()
    uphill = set()
    for module, found in IMPORTS.items():
        rank, component = placed[module]
        for imp in found:
            if imp.imported not in placed:
                continue
            to_rank, to_component = placed[imp.imported]
            if to_rank < rank or (to_rank == rank and to_component != component):
                kind = "a peer" if to_rank == rank else "an upper layer"
                uphill.add(f"{module}:{imp.line} ({component}) imports {imp.imported} ({to_component}), "
                              f"{kind}")
    assert not uphill, "imports that run uphill (docs/architecture.md):\n" + "\n".join(sorted(uphill))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for node in sorted(graph):
            if node not in index:
                connect(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_import_cycle_among_product_modules():
    """Imports run when their module is imported (functions' bodies and type-checking blocks aside)."""
    graph = {m: {i.imported for i in found if not i.lazy and i.imported in MODULES and i.imported != m}
             for m, found in IMPORTS.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _path_to_io(start: str) -> list[str] | None:
    """The shortest chain of imports (lazy ones too, and the packages each import runs) from ``start``
    to a module that does I/O, or None."""
    previous: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        module = queue.pop(0)
        if module not in MODULES:
            if module in IO_ROOTS:
                chain = [module]
                while previous[chain[-1]] is not None:
                    chain.append(previous[chain[-1]])
                return chain[::-1]
            continue
        parts = module.split(".")
        packages = [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES]
        for nxt in packages + [i.imported for i in IMPORTS[module]]:
            if nxt not in previous:
                previous[nxt] = module
                queue.append(nxt)
    return None


def test_the_pure_domain_reaches_nothing_that_does_io():
    reached = {}
    for module in MODULES:
        if any(module == p or module.startswith(p + ".") for p in PURE):
            chain = _path_to_io(module)
            if chain:
                reached[module] = " -> ".join(chain)
    assert reached == {}, "pure modules that reach I/O:\n" + "\n".join(f"{m}: {c}" for m, c in sorted(reached.items()))


def test_the_io_finder_prints_the_chain():
    chain = _path_to_io("credence.streams.ops.worker")
    assert chain is not None and chain[0] == "credence.streams.ops.worker" and chain[-1] in IO_ROOTS


def test_every_package_folder_is_installed():
    # pyproject.toml lists packages one by one: a folder missing there works in an editable checkout and is
    # absent from a wheel or an image.
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {module for module, path in MODULES.items() if path.name == "__init__.py"}
    assert packages - listed == set(), "add these to pyproject.toml's [tool.setuptools] packages"


# A file holds one concept and a function does one thing: past these sizes they rarely still do. The
# benchmarks are product code too (they ship beside it and are read as its proof of speed).
MAX_FILE_LINES, MAX_FUNCTION_LINES = 400, 60
SIZED = {**MODULES, **{f"benchmarks.{p.stem}": p for p in sorted((ROOT / "benchmarks").glob("*.py"))}}


def test_no_product_file_over_400_lines():
    long = {name: n for name, path in SIZED.items()
            if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}, f"files over {MAX_FILE_LINES} lines (split a concept into its own module): {long}"


def test_no_product_function_over_60_lines():
    long = {}
    for name, path in SIZED.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                    long[f"{name}.{node.name}:{node.lineno}"] = n
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


# A module docstring says what the module is; the design behind it (why, guarantees, what was measured)
# lives in the docs site, where it is found, linked and kept up to date. Counted in lines of its text.
MAX_DOCSTRING_LINES = 12


def test_no_module_docstring_over_twelve_lines():
    long = {}
    for name, path in SIZED.items():
        doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path)))
        if doc and (n := len(doc.splitlines())) > MAX_DOCSTRING_LINES:
            long[name] = n
    assert long == {}, (f"module docstrings over {MAX_DOCSTRING_LINES} lines (say what the module is; move "
                        f"the design into a docs/ page): {long}")


def test_the_wheel_holds_no_test_rig():
    # A wheel module that imports tests/ breaks once installed; one that nothing in the wheel reaches from
    # its commands ([project.scripts]) is there only for the tests: a rig, whose home is tests/support/.
    # Reached = imported, lazily too; a dynamic import_module(f"pkg.{name}") reaches every module of pkg.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    installed = set(project["tool"]["setuptools"]["packages"])
    wheel = {module for module, path in MODULES.items()
             if (module if path.name == "__init__.py" else module.rsplit(".", 1)[0]) in installed}
    into_tests = sorted({f"{i.importer}:{i.line}" for module in wheel for i in IMPORTS[module]
                         if i.imported == "tests"})
    assert into_tests == [], f"wheel modules importing the test suite (move the rig to tests/support/): {into_tests}"

    def own_package(node: ast.Call) -> bool:
        # import_module(f"{__name__}.{name}") in a package's __init__: every module of that package
        arg = node.args[0] if node.args else None
        return (isinstance(arg, ast.JoinedStr) and bool(arg.values) and isinstance(arg.values[0], ast.FormattedValue)
                and isinstance(arg.values[0].value, ast.Name) and arg.values[0].value.id == "__name__")

    def dynamic_prefixes(module: str) -> set[str]:
        tree = ast.parse(MODULES[module].read_text())
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
        return ({f"{name}." for node in calls
                 if isinstance(node.args[0] if node.args else None, ast.JoinedStr) and (name := _dynamic_name(node))}
                | {f"{module}." for node in calls if MODULES[module].name == "__init__.py" and own_package(node)})

    reached: set[str] = set()
    todo = [target.split(":")[0] for target in project["project"]["scripts"].values()]
    while todo:
        module = todo.pop()
        if module in reached or module not in MODULES:
            continue
        reached.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:n]) for n in range(1, len(parts))]
        todo += [i.imported for i in IMPORTS[module]]
        todo += [other for prefix in dynamic_prefixes(module) for other in MODULES if other.startswith(prefix)]
    unreached = sorted(wheel - reached)
    assert unreached == [], f"wheel modules nothing in the product imports (a rig: tests/support/): {unreached}"


def _strings_naming_topics_or_kinds(source: str, topics: set[str], kinds: set[str],
                                    records: set[str]) -> list[tuple[int, str]]:
    """(line, text) of each string literal that names a topic where a topic is meant (a send, an Emit, a
    topic lookup, a comparison with a topic), a record kind where a kind is meant (compared with a kind or
    a record's type, a record's "type", a KINDS tuple) or a record type a decoder is asked for."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []

    def literals(node: ast.AST, names: set[str]) -> list[ast.Constant]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [i for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in names]

    def flag(nodes: list[ast.Constant]) -> None:
        found.extend((n.lineno, n.value) for n in nodes)

    topic_calls = {"Emit", "topic", "send", "send_many", "_send", "_send_soon", "retention_hours", "bounded",
                   "forward", "duplicate_id", "decode_input", "position_of", "first_time", "apply"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in topic_calls:
                flag([c for arg in node.args for c in literals(arg, topics)])
            if called in ("decode", "check") and len(node.args) > 1:
                flag(literals(node.args[1], records))
            if called in ("as_record", "Kind", "Application") and node.args:  # a kind a wire form is read as
                flag(literals(node.args[0], kinds))
            if called == "getattr" and len(node.args) > 1 and "topics" in ast.unparse(node.args[0]):
                flag(literals(node.args[1], topics))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in operands:
                others = " ".join(ast.unparse(o) for o in operands if o is not operand)
                if re.search(r"topic|\bname\b", others):
                    flag(literals(operand, topics))
                if re.search(r"kind|\[.type.\]|get\(.type.", others):
                    flag(literals(operand, kinds))
        elif isinstance(node, ast.Subscript) and "TOPICS" in ast.unparse(node.value):
            flag(literals(node.slice, topics))
        elif isinstance(node, ast.Subscript) and "RECORDS" in ast.unparse(node.value):
            flag(literals(node.slice, records))  # a record type is named by its RecordType (envelope.TURN)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in ("type", "kind") and value is not None:
                    flag(literals(value, kinds))
        elif isinstance(node, ast.Assign) and any("KIND" in ast.unparse(t) for t in node.targets):
            flag(literals(node.value, kinds))
    return found


def test_no_topic_or_record_kind_is_spelled_as_a_string_outside_the_registry():
    """Topics are named by their TopicSpec (credence/records/topics.py: TOPICS.evidence) and input kinds by Kind
    (credence/records/kind.py); a string where either is meant escapes both, and a rename misses it."""
    from credence.records.kind import Kind
    from credence.records.topics import TOPICS

    topics = set(TOPICS) | {spec.attribute for spec in TOPICS.values()}
    kinds, records = {kind.value for kind in Kind}, {spec.record.name for spec in TOPICS.values()}
    bad = ('Emit("evidence", r)\nif item.kind == "tick": pass\nx = {"type": "result"}\ngetattr(self.topics, "dlq")\n'
           'decode(raw, "card")\nas_record("flush", wire)\nRECORDS["tenant"]\n')
    assert sorted(v for _, v in _strings_naming_topics_or_kinds(bad, topics, kinds, records)) == [
        "card", "dlq", "evidence", "flush", "result", "tenant", "tick"]
    owners = ("credence.records.topics", "credence.records")
    spelled = [f"{module}:{line}: {value!r}" for module, path in MODULES.items()
               if not any(module == o or module.startswith(o + ".") for o in owners)
               for line, value in _strings_naming_topics_or_kinds(path.read_text(), topics, kinds, records)]
    assert spelled == [], "say TOPICS.<topic> or Kind.<KIND>, not the string:\n" + "\n".join(sorted(spelled))
