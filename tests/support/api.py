"""Helpers for the HTTP API integration tests: tenants made through the same code as `credence tenants`,
workers with /v1, and the typed client pointed at them."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager

from credence.client import Client
from credence.config import Settings
from credence.streams.ops import tenant_admin
from credence.streams.ops.worker_process import WorkerProcess


def add_tenant(bootstrap: str, settings: Settings, name: str, **overrides) -> str:
    return asyncio.run(tenant_admin.add(bootstrap, settings, name, tenant_admin.overrides(overrides)))


def client(worker: WorkerProcess, key: str | None, tenant: str) -> Client:
    return Client(worker.url, key, tenant)


def turn_bodies(lines: list[bytes]) -> list[dict]:
    """Sample lines as API turn bodies (no tenant: the path names it), grouped by tenant."""
    out: dict[str, list[dict]] = {}
    for line in lines:
        obj = json.loads(line)
        out.setdefault(obj.pop("tenant"), []).append(obj)
    return out


@asynccontextmanager
async def mcp_session(url: str, key: str | None):
    """The MCP SDK's own client on a worker's POST /mcp, initialised, with the key as a bearer header."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with (create_mcp_http_client(headers=headers) as http,
                streamable_http_client(url + "/mcp", http_client=http) as (read, write),
                ClientSession(read, write) as session):
        await session.initialize()
        yield session
