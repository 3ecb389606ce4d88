"""The API's modules share the Handlers through its public methods: none calls a private method that a
class of another API module defines (route modules such as memory_ops take the Handlers as `handlers`)."""

import ast
from pathlib import Path

API = Path(__file__).resolve().parents[3] / "streams" / "api"


def private_calls(sources: dict[str, str]) -> list[str]:
    """`receiver._name` in one module where `_name` is a private method of a class of another module
    (`self`/`cls` aside: a class may reach into its own)."""
    trees = {name: ast.parse(text) for name, text in sources.items()}
    owners: dict[str, set[str]] = {}
    for name, tree in trees.items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name.startswith("_") \
                        and not fn.name.startswith("__"):
                    owners.setdefault(fn.name, set()).add(name)
    return sorted(f"{name}:{node.lineno} {ast.unparse(node)}" for name, tree in trees.items()
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr in owners and name not in owners[node.attr]
                  and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")))


def test_no_api_module_calls_another_s_private_methods():
    sources = {path.name: path.read_text() for path in sorted(API.glob("*.py"))}
    assert private_calls(sources) == []


def test_the_finder_names_a_call_into_another_module_s_private_method():
    sources = {"a.py": "class A:\n    def _x(self):\n        return self._x\n",
               "b.py": "def f(a):\n    return a._x()\n"}
    assert private_calls(sources) == ["b.py:2 a._x"]
