"""The OpenAPI document is generated from the route table and the models, and is self-consistent."""

from __future__ import annotations

import re

from credence.streams.api.openapi import document
from credence.streams.api.routes import ROUTES


def refs(node) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if "$ref" in node else set()
        return found.union(*(refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(refs(v) for v in node)) if node else set()
    return set()


def test_every_route_is_documented_with_its_parameters_and_models():
    doc = document()
    for route in ROUTES:
        op = doc["paths"][route.path][route.method.lower()]
        assert op["operationId"] == route.name
        path_params = {p["name"] for p in op["parameters"] if p["in"] == "path"}
        assert path_params == set(re.findall(r"{(\w+)}", route.path))
        assert {"401", "404", "429", str(route.status)} <= set(op["responses"])
        assert ("requestBody" in op) == (route.body is not None)
    assert sum(len(p) for p in doc["paths"].values()) == len(ROUTES)
    assert len({r.name for r in ROUTES}) == len(ROUTES)


def test_every_reference_resolves():
    doc = document()
    schemas = doc["components"]["schemas"]
    found = list(refs(doc))
    assert found, "the document names its schemas by reference"  # else the loop checks nothing
    for ref in found:
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref
