"""One kept pool of keep-alive connections to a model server, and the little a chat call needs of HTTP.

aiohttp, not httpx: at 64 requests in flight httpx's pool walks every connection (a readability probe,
a system call, for each idle one) twice per request, and its synchronisation re-tries a failed import
of sniffio on every event; measured on a catch-up replay that was ~45% of the worker's CPU per turn.
aiohttp's pool hands out a free connection in constant time and parses responses in C.

A session belongs to the event loop it was opened in, so it opens on the first call (a backend is often
built before any loop runs) and again if a later call runs in another loop."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

import aiohttp
import certifi

JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Reply:
    status: int
    retry_after: str | None
    body: bytes
    url: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def text(self, limit: int) -> str:
        return self.body[:limit].decode("utf-8", "replace")


def _tls() -> ssl.SSLContext:
    """The certificate authorities httpx trusted (certifi's bundle), so an https server that verified
    before still does on an image without a system CA store."""
    return ssl.create_default_context(cafile=certifi.where())


class ChatClient:
    """POSTs JSON bodies to `base_url`; raises asyncio.TimeoutError when connecting or a read waits
    longer than timeout_s (as httpx's per-phase timeouts did) and aiohttp.ClientError for a broken
    connection."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout_s: float, connections: int) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.connections = connections  # at most this many open, every one kept alive between calls
        self._headers = JSON_HEADERS | headers
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _current(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            self._drop_stale()
            # an idle connection stays open 15 s (aiohttp's default), past any gap between calls of steady
            # work; limit_per_host 0: the one host may use the whole pool
            connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0, keepalive_timeout=15.0,
                                             ssl=_tls() if self.base_url.startswith("https:") else True)
            # trust_env: proxies from HTTP(S)_PROXY/NO_PROXY, as httpx honoured them
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                                  timeout=self._timeout, trust_env=True)
            self._loop = loop
        return self._session

    def _drop_stale(self) -> None:
        """The pool of a loop that has ended: marked closed (no await possible there), so it is not
        reported as leaked; its sockets went with that loop."""
        if self._session is not None and self._loop is not None and self._loop.is_closed():
            # with its loop closed, the connector's synchronous part only marks it closed (the public
            # close() is a coroutine, and there is no loop left to run it in)
            self._session.connector._close()
        self._session = None

    async def post(self, path: str, body: bytes) -> Reply:
        async with self._current().post(self.base_url + path, data=body) as response:
            data = await response.read()
            return Reply(response.status, response.headers.get("retry-after"), data, str(response.url))

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            session, self._session = self._session, None
            await session.close()
        else:
            self._drop_stale()
