"""POST /mcp on the worker's web port: memory for agents over MCP's streamable HTTP transport.

The official SDK speaks the protocol: its low-level `Server` (the tools of mcp_tools) behind its
`StreamableHTTPSessionManager`, stateless with JSON responses, called through a small ASGI bridge from the
aiohttp handler. The bearer key is checked here, like /v1 (401 for a missing or unknown key, 429 over the
tenant's rate, 413 over its body limit), before the SDK sees the request, so no tool runs unauthorised;
the caller's tenant rides in the ASGI scope to the tool call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING

import mcp_types as types
from faust.web import View
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from credence import __version__, tracing
from credence.errors import ApiError
from credence.streams.api import asgi, mcp_tools
from credence.streams.api.http import error_response, read_body, server_span

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

log = logging.getLogger(__name__)

PATH = "/mcp"
INSTRUCTIONS = ("credence keeps evidence-based memory per (user, character) of your tenant. Put get_prompt's text "
                "in the character's prompt (get_recent adds the recent conversation's memo and newest turns); "
                "send every turn with add_turns; recall searches the memory; give_feedback applies what the user "
                "confirms or denies.")


def tool_list() -> list[types.Tool]:
    return [types.Tool(name=t.name, description=t.description, input_schema=mcp_tools.input_schema(t),
                       output_schema=mcp_tools.output_schema(t),
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only, destructive_hint=False,
                                                         open_world_hint=False))
            for t in mcp_tools.TOOLS]


def refused(exc: ApiError) -> types.CallToolResult:
    """A tool error the model can read and act on: the route's status and reason."""
    return types.CallToolResult(content=[types.TextContent(text=f"refused ({exc.status}): {exc.reason}")],
                                is_error=True)


def answered(name: str, result: dict) -> types.CallToolResult:
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    # A batch of turns none of which was accepted wrote nothing: that is an error the model should see.
    failed = name == "add_turns" and not result.get("accepted") and bool(result.get("rejected"))
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result, is_error=failed)


class McpEndpoint:
    def __init__(self, api) -> None:
        self.api = api
        self.tools = tool_list()
        self.server = Server("credence", version=__version__, instructions=INSTRUCTIONS,
                             on_list_tools=self.list_tools, on_call_tool=self.call_tool)
        # The SDK's DNS rebinding protection, with the door's lists (the door has checked them already).
        self.manager = StreamableHTTPSessionManager(self.server, json_response=True, stateless=True,
                                                    security_settings=api.door.transport_security())
        self.running = asyncio.Event()

    async def serve(self) -> None:
        """The SDK's task group, for as long as the worker runs (its task is cancelled at shutdown)."""
        async with self.manager.run():
            self.running.set()
            await asyncio.Event().wait()

    async def handle(self, request):
        if not tracing.active():
            return await self._handle(request)
        with server_span(request, PATH) as span:
            response = await self._handle(request)
            span.set_attribute("http.response.status_code", response.status)
            return response

    async def _handle(self, request):
        try:
            caller = self.api.authenticate(request)
            limit = caller.settings.max_body_bytes or self.api.credence.settings.api.max_body_bytes
            body = await read_body(request, limit)
            if not self.running.is_set():
                raise ApiError(503, "the MCP endpoint is starting; retry shortly", {"Retry-After": "1"})
        except ApiError as exc:
            return error_response(exc)
        state = {"caller": caller, "authorization": request.headers["Authorization"]}
        return await asgi.call(self.manager.handle_request, request, body, state)

    async def list_tools(self, ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def call_tool(self, ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        state = ctx.request.scope["state"]
        with tracing.span(f"credence.mcp {params.name}", attributes={"credence.mcp.tool": params.name}):
            return await self._call_tool(state, params)

    async def _call_tool(self, state, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            result = await mcp_tools.run(self.api, state["caller"], state["authorization"], params.name,
                                         params.arguments)
        except ApiError as exc:
            return refused(exc)
        except Exception:  # noqa: BLE001 - a bug answers a tool error, not a dropped connection
            log.exception("MCP tool %s failed", params.name)
            return refused(ApiError(500, "internal error; see the worker log"))
        return answered(params.name, result)


def register(credence: Credence, api) -> McpEndpoint:
    endpoint = McpEndpoint(api)

    class Mcp(View):
        async def post(self, request):
            return await endpoint.handle(request)

    credence.app.page(PATH, name="mcp")(Mcp)
    credence.app.task(endpoint.serve)
    return endpoint
