"""The docs site's generated pages (a mkdocs hook, mkdocs.yml `hooks:`): the configuration reference from the
settings model and the HTTP API reference from the OpenAPI document the worker serves. Generated at build time,
never committed, so neither can drift from the code; tests/unit/test_config_reference.py checks the first."""

from __future__ import annotations

import inspect
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

DOCS = Path(__file__).resolve().parents[1]
SETTINGS_PAGE = "reference/settings.md"
HTTP_PAGE = "reference/http.md"
PLOTS = DOCS.parent / "benchmarks" / "results"
# The hand-written pages whose tables explain a variable the model's comments do not.
HAND_WRITTEN = ("configuration.md", "operations/kafka.md")


@dataclass(frozen=True)
class Setting:
    env: str
    type: str
    default: str
    description: str


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """field -> the comment lines right above its definition (no blank line between) and its trailing comment."""
    lines = inspect.getsource(model).splitlines()
    found = {}
    for name in model.model_fields:
        at = next((i for i, line in enumerate(lines) if re.match(rf"\s+{name}\s*:", line)), None)
        if at is None:
            continue
        above = []
        for line in reversed(lines[:at]):
            if not line.strip().startswith("#"):
                break
            above.insert(0, line.strip().lstrip("#").strip())
        trailing = re.search(r"\s#\s(.+)$", lines[at])
        found[name] = " ".join(above + ([trailing.group(1)] if trailing else []))
    return found


def _default(field) -> str:
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return ""
    if hasattr(value, "get_secret_value"):
        value = "***"
    text = json.dumps(value, default=str, ensure_ascii=False) if isinstance(value, (dict, list, tuple)) else str(value)
    return text.replace(str(Path.home()), "~")


def _type(annotation) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    return text or re.sub(r"\b(typing|pathlib|pydantic\.types)\.", "", str(annotation))


def walk(model: type[BaseModel], prefix: str = "CREDENCE_") -> list[Setting]:
    """Every settings field under the environment variable that sets it (nested sections joined by `__`)."""
    comments = field_comments(model)
    found = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            found += walk(field.annotation, f"{prefix}{name.upper()}__")
        else:
            found.append(Setting(f"{prefix}{name.upper()}", _type(field.annotation), _default(field),
                                 comments.get(name, "")))
    return found


def hand_written_rows() -> list[str]:
    """The rows of the hand-written tables that document variables (first cell names a CREDENCE_ variable), their
    links rebased onto the reference page."""
    rows = []
    for page in HAND_WRITTEN:
        path = DOCS / page
        if path.exists():
            rows += [_rebase(line, page) for line in path.read_text().splitlines() if line.startswith("| `CREDENCE_")]
    return rows


def _rebase(text: str, page: str) -> str:
    """Relative links written on `page`, made to work from the reference page."""
    def rebased(match: re.Match) -> str:
        target, _, anchor = match.group(1).partition("#")
        if not target or "://" in target:
            return match.group(0)
        moved = os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(page), target)),
                                os.path.dirname(SETTINGS_PAGE))
        return f"]({moved}{'#' + anchor if anchor else ''})"
    return re.sub(r"\]\(([^)]+)\)", rebased, text)


def documented_in(env: str, rows: list[str]) -> str | None:
    """The hand-written row naming `env`: in full in its first cell; or as `__LEAF` beside a sibling of its section
    there (`CREDENCE_LLM__TIMEOUT_S` / `__MAX_RETRIES`); or as `LEAF` in a section's `CREDENCE_X__*` row."""
    section, _, leaf = env.rpartition("__")
    for row in rows:
        first = row.split("|")[1]
        if f"`{env}`" in first:
            return row
        if section and f"`{section}__" in first and f"`__{leaf}`" in first:
            return row
        if section and f"`{section}__*`" in first and re.search(rf"`{leaf}`", row):
            return row
    return None


def _describe(setting: Setting, rows: list[str]) -> str:
    """The hand-written row's meaning where one names this variable (written for operators), else the code's
    comment (a bare group heading such as `# Worker.` says nothing of the field), else the group's row."""
    explained = _explained(setting.env, rows)
    if explained and not explained.endswith("(see [Configuration](../configuration.md))"):
        return explained
    comment = "" if re.fullmatch(r"[\w ,()/-]{0,40}\.", setting.description) else setting.description
    return comment or explained


def _explained(env: str, rows: list[str]) -> str:
    """A field the code leaves uncommented: its own hand-written row's meaning, or a link to a section's row."""
    row = documented_in(env, rows)
    if row is None:
        return ""
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
    if "__*`" in cells[0]:  # a group's row: the clause that names the field, e.g. "thresholds `PROMOTED_…` 2.0, …"
        leaf = env.rpartition("__")[2]
        clause = next((c.strip() for c in cells[-1].split("; ") if f"`{leaf}`" in c), "")
        return f"{clause} (see [Configuration](../configuration.md))".lstrip()
    return cells[-1]


def _cell(text: str) -> str:
    return re.sub(r"(?<!\\)\|", r"\\|", text).replace("\n", " ")


def settings_reference() -> str:
    from credence.config import Settings

    rows = hand_written_rows()
    out = ["# Configuration reference", "",
           "Generated from the settings model (`config/`) when the site is built: every field, the environment",
           "variable that sets it, its type and default, and what it does: the hand-written row of",
           "[Configuration](../configuration.md) that names it, else the comment beside it in the code.", ""]
    section = None
    for s in walk(Settings):
        group = s.env.rpartition("__")[0]
        if group != section:
            section = group
            title = f"`{group}__*`" if group else "Top level"
            out += ["", f"## {title}", "", "| variable | type | default | description |", "|---|---|---|---|"]
        default = {"": "*(empty)*", "None": "*(none)*"}.get(s.default, f"`{_cell(s.default)}`")
        out.append(f"| `{s.env}` | `{_cell(s.type)}` | {default} | {_cell(_describe(s, rows))} |")
    return "\n".join(out) + "\n"


def _type_of(spec: dict) -> str:
    """A JSON schema's type in a few words: `string | null`, `array of EntryView` (linked), `object`."""
    if "$ref" in spec:
        name = _schema_name(spec)
        return f"[{name}](#{name.lower()})"
    if "anyOf" in spec:
        return " \\| ".join(_type_of(option) for option in spec["anyOf"])
    kind = spec.get("type", "any")
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"array of {_type_of(spec['items'])}"
    if "enum" in spec:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in spec["enum"])
    return kind + (f" ({spec['format']})" if "format" in spec else "")


def _schema_name(node: dict) -> str:
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[1]
    return node.get("type", "object")


def http_reference() -> str:
    from credence.streams.api.openapi import document

    doc = document()
    out = ["# HTTP API reference", "",
           "Generated from the OpenAPI document the worker serves at `GET /v1/openapi.json`",
           "(`streams/api/openapi.py`: the route table and the pydantic models the server validates with) when the",
           f"site is built. {doc['info']['description']}", ""]
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            out += [f"## `{method.upper()} {path}`", "", op.get("summary") or "", ""]
            if op["parameters"]:
                out += ["| parameter | in | description |", "|---|---|---|"]
                out += [f"| `{p['name']}` | {p['in']} | {_cell(p.get('description') or '')} |" for p in op["parameters"]]
                out.append("")
            if "requestBody" in op:
                body = op["requestBody"]["content"]["application/json"]["schema"]
                out += [f"Body: [`{_schema_name(body)}`](#{_schema_name(body).lower()})", ""]
            answers = [f"{code} [`{_schema_name(r['content']['application/json']['schema'])}`]"
                       f"(#{_schema_name(r['content']['application/json']['schema']).lower()})"
                       for code, r in op["responses"].items() if code.startswith("2")]
            out += [f"Answers: {', '.join(answers)}; errors " +
                    ", ".join(c for c in op["responses"] if not c.startswith("2")) + ".", ""]
    out += ["## Schemas", ""]
    for name, schema in doc["components"]["schemas"].items():
        out += [f"### {name}", ""]
        if schema.get("description", "").strip():
            out += [schema["description"].strip(), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| field | type | required | description |", "|---|---|---|---|"]
            for field, spec in props.items():
                out.append(f"| `{field}` | {_cell(_type_of(spec))} | {'yes' if field in required else ''} | "
                           f"{_cell(spec.get('description', ''))} |")
            out.append("")
    return "\n".join(out) + "\n"


def plot_uri(png: Path) -> str:
    """Where a benchmark report's plot is served: its name made URL-safe (`serving_(recall).png`)."""
    return "img/benchmarks/" + re.sub(r"[^A-Za-z0-9.-]+", "-", png.name)


def on_files(files, config):
    """mkdocs hook: add the generated pages and the benchmark report's plots to the build (never on disk)."""
    from mkdocs.structure.files import File

    for uri, text in ((SETTINGS_PAGE, settings_reference()), (HTTP_PAGE, http_reference())):
        files.append(File.generated(config, uri, content=text))
    for png in sorted(PLOTS.glob("*.png")):
        files.append(File.generated(config, plot_uri(png), abs_src_path=str(png)))
    return files
