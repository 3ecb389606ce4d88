"""The docs site's HTTP API reference is generated from the OpenAPI document the worker serves
(docs/hooks/reference.py): every route with its parameters, every schema with its fields."""

from __future__ import annotations

from credence.streams.api.openapi import document
from tests.support.readme_blocks import reference_generator


def test_every_route_and_schema_of_the_openapi_document_is_in_the_reference():
    page = reference_generator().http_reference()
    doc = document()
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            section = page[page.index(f"## `{method.upper()} {path}`"):]
            section = section[:section.find("\n## ", 1)]
            for parameter in op["parameters"]:
                assert f"| `{parameter['name']}` | {parameter['in']} |" in section, (method, path, parameter["name"])
    for name, schema in doc["components"]["schemas"].items():
        section = page[page.index(f"### {name}\n"):]
        for field in schema.get("properties", {}):
            assert f"| `{field}` |" in section.split("\n### ", 1)[0], (name, field)
