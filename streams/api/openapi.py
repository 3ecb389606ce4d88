"""The OpenAPI 3.1 document, generated from the route table and the pydantic models."""

from __future__ import annotations

import re

from pydantic.json_schema import models_json_schema

from credence import __version__
from credence import api_models as models
from credence.streams.api.routes import ROUTES, Route

REF = "#/components/schemas/{model}"
ERRORS = {"400": "malformed JSON or path part", "401": "no or unknown key", "404": "not found (also: another "
          "tenant's path)", "413": "body too large", "422": "invalid fields", "429": "over the rate (Retry-After)",
          "503": "the scope's owner is moving or unreachable (Retry-After)"}


def _operation(route: Route) -> dict:
    params = [{"name": p, "in": "path", "required": True, "schema": {"type": "string", "maxLength": 200}}
              for p in re.findall(r"{(\w+)}", route.path)]
    params += [{"name": q.name, "in": "query", "required": False, "description": q.description,
                "schema": {"type": q.type}} for q in route.query]
    op = {"operationId": route.name, "summary": route.summary, "parameters": params,
          "security": [{"bearer": []}],
          "responses": {str(route.status): _content(route.response, "success")}
          | {code: _content(models.Error, text) for code, text in ERRORS.items()}}
    if route.body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": {"$ref": REF.format(model=route.body.__name__)}}}}
    return op


def _content(model, description: str) -> dict:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": REF.format(model=model.__name__)}}}}


def document() -> dict:
    used = {models.Error}
    for route in ROUTES:
        used.add(route.response)
        if route.body is not None:
            used.add(route.body)
    _, schemas = models_json_schema([(m, "validation" if m is not models.Error else "serialization")
                                     for m in sorted(used, key=lambda m: m.__name__)], ref_template=REF)
    paths: dict[str, dict] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {"openapi": "3.1.0",
            "info": {"title": "credence", "version": __version__,
                     "description": "User-steered evidence memory for AI chat characters. Every /v1 route needs "
                                    "'Authorization: Bearer <tenant key>' (`credence tenants add`)."},
            "paths": paths,
            "components": {"schemas": schemas.get("$defs", {}),
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}}
