"""Mounting /v1 on the worker's web server (Faust's aiohttp): one Faust View per path, dispatching each
method through auth, path checks, body parsing, owner routing and the handler, in that order."""

from __future__ import annotations

import asyncio
import logging

from faust.web import View

from credence import tracing
from credence.errors import ApiError
from credence.streams.api.auth import RateLimits, authenticate
from credence.streams.api.directory import Directory, follow
from credence.streams.api.door import Door, middleware
from credence.streams.api.handlers import Call, Handlers
from credence.streams.api.http import error_response, json_response, parse_body, path_parts, read_body, server_span
from credence.streams.api.routes import ROUTES, Route
from credence.streams.api.routing import OwnerRouter
from credence.streams.runtime.app import Credence
from credence.streams.runtime.views import is_ready
from credence.tables.scope import scope_key

log = logging.getLogger(__name__)


class MalformedRequests(logging.Filter):
    """aiohttp answers a request its parser refuses (a 10,000-character path, a broken header) with a
    400 and its reason, then logs it as an error with a traceback: say it in one warning line instead, so
    a hostile client cannot fill the log with tracebacks or pass for a server fault."""

    def filter(self, record: logging.LogRecord) -> bool:
        from aiohttp.http_exceptions import HttpProcessingError

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = "HTTP: refused a malformed request from %s with %s: %s"
            record.args = (*(record.args or ("?",))[:1], exc.code, " ".join(str(exc.message).split())[:200])
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.exc_info = record.exc_text = None
        return True


_MALFORMED = MalformedRequests()


class Api:
    """Everything the /v1 routes share in one worker."""

    def __init__(self, credence: Credence, bootstrap: str, directory: Directory) -> None:
        self.credence = credence
        self.bootstrap = bootstrap
        self.directory = directory
        self.limits = RateLimits(credence.settings.api)
        self.router = OwnerRouter(credence.app, credence.state_tables["scopes"].name, credence.settings.topic_partitions,
                                  credence.settings.api.forward_timeout_seconds,
                                  credence.settings.api.turn_wait_max_seconds)
        self.handlers = Handlers(credence, directory, bootstrap, self.router)
        settings = credence.settings
        self.door = Door.of(settings.api, str(credence.app.conf.canonical_url), settings.web_host)

    def authenticate(self, request, tenant: str | None = None):
        """The tenant of the request's key (401/404/429 as ApiError); what the browser and /metrics use."""
        return authenticate(request, tenant, directory=self.directory, limits=self.limits)

    async def dispatch(self, route: Route, request, params: dict[str, str]):
        if not tracing.active():
            return await self._dispatch(route, request, params)
        with server_span(request, route.path) as span:
            response = await self._dispatch(route, request, params)
            span.set_attribute("http.response.status_code", response.status)
            return response

    async def _dispatch(self, route: Route, request, params: dict[str, str]):
        try:
            caller = self.authenticate(request, params.get("tenant"))
            path_parts(params)
            raw = None
            body = None
            if route.body is not None:
                limit = caller.settings.max_body_bytes or self.credence.settings.api.max_body_bytes
                raw = await read_body(request, limit)
                body = parse_body(route.body, raw)
            if route.by_owner:
                scope = scope_key(params["tenant"], params["user"], params["character"])
                forwarded = await self.router.forward(request, scope, raw)
                if forwarded is not None:
                    return forwarded
            status, result = await self.answer(route, caller, params, body, request.query,
                                               request.headers.get("Authorization", ""))
            return json_response(status, result)
        except ApiError as exc:
            return error_response(exc)
        except Exception:  # noqa: BLE001 - a bug must answer 500, not drop the connection
            log.exception("%s %s failed", request.method, request.path)
            return error_response(ApiError(500, "internal error; see the worker log"))

    async def answer(self, route: Route, caller, params: dict[str, str], body, query, authorization: str = ""):
        """This worker's own answer, once the caller, path, body and owner are settled (HTTP and MCP)."""
        if route.by_owner and not is_ready(self.credence.app):  # an owner still recovering its tables has no answer
            raise ApiError(503, "this worker is recovering its tables; retry shortly", {"Retry-After": "1"})
        return await getattr(self.handlers, route.name)(Call(tenant=caller, params=params, body=body, query=query,
                                                                     authorization=authorization))


def _view(api: Api, routes: list[Route]) -> type[View]:
    by_method = {r.method.lower(): r for r in routes}

    def method(route: Route):
        async def handle(self, request, **params):
            return await api.dispatch(route, request, {k: str(v) for k, v in params.items()})
        return handle

    name = "v1_" + routes[0].name
    return type(name, (View,), {m: method(r) for m, r in by_method.items()})


def register(credence: Credence, bootstrap: str, directory: Directory) -> Api:
    """Mount /v1 and start following the tenants and cards topics into `directory` (which the worker's
    stream reads its tenants' settings from); returns the Api (for other pages)."""
    api = Api(credence, bootstrap, directory)
    app = credence.app
    if app.conf.web_enabled:  # the door before every route of the port, Faust's own pages included
        app.web.web_app.middlewares.append(middleware(api.door))
    server_log = logging.getLogger("aiohttp.server")
    if _MALFORMED not in server_log.filters:
        server_log.addFilter(_MALFORMED)
    by_path: dict[str, list[Route]] = {}
    for route in ROUTES:
        by_path.setdefault(route.path, []).append(route)
    for path, routes in by_path.items():
        app.page(path, name=f"v1_{routes[0].name}")(_view(api, routes))
    from credence.streams.api.mcp_server import register as register_mcp
    from credence.streams.api.scope_views import register as register_scope_views

    register_scope_views(api)  # /scopes and /scope/…, behind the keys

    register_mcp(credence, api)  # the same routes as MCP tools, on POST /mcp

    @app.task
    async def follow_directory():
        # A broken connection must not leave the worker with a frozen key list: read again from the
        # start (applying a record twice is harmless, the latest per key wins).
        delay = 1.0
        while True:
            try:
                await follow(api.directory, bootstrap, credence.settings)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("following the tenants and cards topics failed; again in %.0f s", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)

    return api
