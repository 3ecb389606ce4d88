"""HTTP plumbing shared by the routes: reading a bounded body, parsing it into a model, path parts, and
JSON responses (errors always as {"error", "status"})."""

from __future__ import annotations

import json
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from credence import tracing
from credence.errors import ApiError, DomainError
from credence.tables.scope import check_part

M = TypeVar("M", bound=BaseModel)


def json_response(status: int, body, headers: dict[str, str] | None = None) -> web.Response:
    if isinstance(body, BaseModel):
        text = body.model_dump_json()
    else:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
    return web.Response(text=text, status=status, content_type="application/json", headers=headers)


def error_response(exc: ApiError) -> web.Response:
    return json_response(exc.status, {"error": exc.reason, "status": exc.status}, exc.headers)


async def read_body(request, limit: int) -> bytes:
    """The whole body, refusing (413) anything over `limit` bytes before reading it all."""
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, f"request body of {request.content_length} bytes is over this tenant's limit of {limit}")
    chunks, size = [], 0
    async for chunk in request.content.iter_chunked(65536):
        size += len(chunk)
        if size > limit:
            raise ApiError(413, f"request body is over this tenant's limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(model: type[M], raw: bytes) -> M:
    """400 for a body that is not a JSON object, 422 naming every field that is wrong."""
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ApiError(400, "request body must be a JSON object")
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, f"invalid {model.__name__}: {reasons}") from None


def path_parts(params: dict[str, str]) -> dict[str, str]:
    """Every path part that names a tenant, user, character or entry obeys the scope-part rule (400)."""
    for name, value in params.items():
        try:
            check_part(name, value)
        except DomainError as exc:
            raise ApiError(400, str(exc)) from None
    return params


def server_span(request, route: str):
    """An HTTP route's server span, continuing the caller's `traceparent` (route and method only: the
    path's values name users, the headers hold keys)."""
    return tracing.span(f"{request.method} {route}", tracing.SERVER, tracing.http_context(request.headers),
                        {"http.request.method": request.method, "http.route": route,
                         "url.scheme": request.scheme})
