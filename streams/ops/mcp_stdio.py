"""`credence mcp --url URL --key-file F`: a running worker's MCP tools over stdio, for local MCP clients that
start their servers as commands. A thin proxy built from the SDK's own halves: its stdio server in front,
its streamable HTTP client to the worker's POST /mcp behind, so the tools, their schemas and every answer
are the worker's own."""

from __future__ import annotations

from pathlib import Path

from credence import __version__
from credence.errors import CredenceError


def endpoint(url: str) -> str:
    url = url.rstrip("/")
    return url if url.endswith("/mcp") else url + "/mcp"


def read_key(path: str) -> str:
    try:
        key = Path(path).read_text().strip()
    except OSError as exc:
        raise CredenceError(f"cannot read the key file {path}: {exc.strerror}") from None
    if not key:
        raise CredenceError(f"the key file {path} is empty: put the tenant's key in it (`credence tenants add`)")
    return key


async def serve(url: str, key: str) -> None:
    """Serve stdio until the local client closes it; CredenceError when the worker cannot be reached or
    refuses the key (the SDK reports transport failures as exception groups: the first cause is named)."""
    try:
        await _serve(url, key)
    except BaseExceptionGroup as group:
        cause = _first_leaf(group)
        if isinstance(cause, CredenceError):
            raise cause from None
        raise CredenceError(f"the MCP session with the worker at {endpoint(url)} failed ({type(cause).__name__}: "
                            f"{cause}); check --url and the key") from None


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def _serve(url: str, key: str) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    async with (create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http,
                streamable_http_client(endpoint(url), http_client=http) as (read, write),
                ClientSession(read, write) as worker):
        try:
            info = await worker.initialize()
        except Exception as exc:  # noqa: BLE001 - a refused key or an unreachable worker: say which, then stop
            raise CredenceError(f"the worker at {endpoint(url)} did not accept the MCP session "
                                f"({type(exc).__name__}: {exc}); check --url and the key") from None

        async def list_tools(ctx, params):
            return await worker.list_tools(params=params)

        async def call_tool(ctx, params):
            return await worker.call_tool(params.name, params.arguments)

        server = Server("credence", version=__version__, instructions=info.instructions,
                        on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (local_read, local_write):
            await server.run(local_read, local_write, server.create_initialization_options())
