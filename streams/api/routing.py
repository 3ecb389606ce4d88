"""Answering a scope's reads on the worker that owns it.

Faust's `app.table_route` finds the owner with the partition assignor (`app.router.key_store`) and
proxies the request. We use the assignor's table metadata (which worker holds which partition of the
`scopes` changelog) but not the rest: `key_store` hashes the table's *serialized* key (JSON, with
quotes), while a scope's state lives on the partition its raw key hashes to on the input topics (the
changelog follows the input partition), so it names the wrong worker; and Faust's proxy drops the request
body (recall and feedback are POSTs), the response headers (Retry-After), and has no loop guard. A forwarded request carries
FORWARDED_HEADER; a worker that receives one for a scope it does not own (a rebalance in between) answers
503 with Retry-After instead of forwarding again.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web
from aiokafka.partitioner import DefaultPartitioner
from yarl import URL

from credence import tracing
from credence.errors import ApiError

FORWARDED_HEADER = "X-Credence-Forwarded"
PASSED_HEADERS = ("Authorization", "Content-Type", "Accept")
RETURNED_HEADERS = ("Retry-After", "WWW-Authenticate")


def _ident(url: URL) -> tuple[str, int]:
    return (url.host or "", int(url.port or 80))


class OwnerRouter:
    def __init__(self, app, table_name: str, partitions: int, timeout_s: float, wait_s: float = 0.0) -> None:
        self.app = app
        self._partitioner = DefaultPartitioner()
        self._partitions = list(range(partitions))
        self.table_name = table_name
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        # A request that waits for its scope's owner (`?wait=`) may take that long on top.
        self.waiting_timeout = aiohttp.ClientTimeout(total=timeout_s + wait_s)
        self._session: aiohttp.ClientSession | None = None

    def partition(self, scope: str) -> int:
        """The partition of the scope on every scope-keyed topic (the agent's and the producers' rule)."""
        return self._partitioner(scope.encode(), self._partitions, self._partitions)

    def owner(self, scope: str) -> URL | None:
        """The owner's web URL, or None when it is this worker."""
        partition = self.partition(scope)
        try:
            hosts = self.app.router.table_metadata(self.table_name)
        except (KeyError, AttributeError):
            hosts = {}
        url = next((u for u, topics in hosts.items() for parts in topics.values() if partition in parts), None)
        if url is None:
            raise ApiError(503, "partitions are being assigned; retry shortly", {"Retry-After": "1"})
        return None if _ident(URL(str(url))) == _ident(URL(str(self.app.conf.canonical_url))) else URL(str(url))

    async def forward(self, request, scope: str, body: bytes | None) -> web.Response | None:
        """The owner's answer, or None when this worker should answer itself."""
        target = self.owner(scope)
        if target is None:
            return None
        if request.headers.get(FORWARDED_HEADER):
            raise ApiError(503, f"scope {scope} is moving between workers; retry shortly", {"Retry-After": "1"})
        url = request.url.with_scheme(target.scheme or "http").with_host(target.host).with_port(target.port)
        status, payload, kept, content_type = await self._send(
            request.method, url, {h: request.headers[h] for h in PASSED_HEADERS if h in request.headers}, body, scope)
        return web.Response(body=payload, status=status, headers=kept, content_type=content_type)

    async def ask(self, scope: str, method: str, path: str, query: dict[str, str], authorization: str,
                  body: bytes | None) -> tuple[int, bytes] | None:
        """The owner's answer (status, JSON body) to the /v1 request `method path?query`, or None when this
        worker should answer itself: the same forwarding for a caller with no HTTP request of its own to
        pass on (an MCP tool call)."""
        target = self.owner(scope)
        if target is None:
            return None
        url = URL.build(scheme=target.scheme or "http", host=target.host or "", port=target.port, path=path,
                        query=query)
        headers = {"Authorization": authorization, "Content-Type": "application/json"}
        status, payload, _, _ = await self._send(method, url, headers, body, scope)
        return status, payload

    async def _send(self, method: str, url: URL, headers: dict[str, str], body: bytes | None, scope: str):
        headers = tracing.http_headers({**headers, FORWARDED_HEADER: "1"})  # the owner continues the trace
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        try:
            timeout = self.waiting_timeout if "wait" in url.query else self.timeout
            async with self._session.request(method, url, headers=headers, data=body, timeout=timeout) as resp:
                payload = await resp.read()
                kept = {h: resp.headers[h] for h in RETURNED_HEADERS if h in resp.headers}
                return resp.status, payload, kept, resp.content_type
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise ApiError(503, f"the worker owning scope {scope} did not answer ({type(exc).__name__}); "
                                "retry shortly", {"Retry-After": "1"}) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
