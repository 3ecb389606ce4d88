"""Calling an ASGI app from an aiohttp handler, for one buffered request and response. The MCP SDK's
transport is ASGI while the worker's web server is aiohttp; its JSON responses are complete bodies, so
nothing here needs to stream."""

from __future__ import annotations

import asyncio

from aiohttp import web


def scope_of(request: web.Request, state: dict) -> dict:
    """The ASGI HTTP scope of an aiohttp request; `state` rides along as the scope's "state"."""
    host, port = (request.transport.get_extra_info("sockname") or ("", 0))[:2] if request.transport else ("", 0)
    peer = request.transport.get_extra_info("peername") if request.transport else None
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": f"{request.version.major}.{request.version.minor}", "method": request.method,
            "scheme": request.scheme, "path": request.path, "raw_path": request.raw_path.split("?")[0].encode(),
            "query_string": request.query_string.encode(), "root_path": "",
            "headers": [(k.lower(), v) for k, v in request.raw_headers],
            "client": tuple(peer[:2]) if peer else None, "server": (host, port), "state": state}


async def call(app, request: web.Request, body: bytes, state: dict) -> web.Response:
    """The app's response to `request` whose body was already read."""
    done = asyncio.Event()
    sent = {"status": 500, "headers": [], "body": []}
    delivered = False

    async def receive() -> dict:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()  # the client is gone only once the whole response was taken
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            sent["status"], sent["headers"] = message["status"], message.get("headers", [])
        elif message["type"] == "http.response.body":
            sent["body"].append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    try:
        await app(scope_of(request, state), receive, send)
    finally:
        done.set()
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in sent["headers"]]
    response = web.Response(body=b"".join(sent["body"]), status=sent["status"])
    for name, value in headers:
        if name.lower() not in ("content-length", "transfer-encoding"):
            response.headers.add(name, value)
    return response
