"""The web port's door: which Host and Origin a request may carry, checked before any route runs.

A page on another site (or one whose name was rebound to 127.0.0.1: DNS rebinding) can make a browser
send requests to a worker; the Host it names and the Origin the browser adds give it away. Every route of
the port (/v1, /mcp, /status, /metrics, the scope views, the browser) answers such a request with a
refusal and nothing else: 421 for a Host the worker does not serve, 403 for an Origin that is present
and not allowed (MCP's streamable HTTP rule). Allowed by default: the loopback names, the bind host and
the host of the worker's canonical URL (what the other workers forward to); more with
`CREDENCE_API__ALLOWED_HOSTS` / `__ALLOWED_ORIGINS`. `POST /mcp` also runs the MCP SDK's own check
(TransportSecuritySettings) with the same lists.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web
from mcp.server.transport_security import TransportSecuritySettings
from yarl import URL

from credence.errors import ApiError
from credence.streams.api.http import error_response

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
ANY = "*"
WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")


def split_host(value: str) -> tuple[str, int | None] | None:
    """(host, port) of a Host header value or allowed-host entry, lowercased; None when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        host, _, rest = value.partition("]")
        host += "]"
        if rest and not (rest.startswith(":") and rest[1:].isdigit()):
            return None
        port = rest[1:]
    else:
        host, _, port = value.partition(":")
        if port and not port.isdigit():
            return None
    if not host or any(c in host for c in "/@?#\\ \t") or len(host) > 255:
        return None
    return host, int(port) if port else None


@dataclass(frozen=True)
class Door:
    hosts: frozenset[tuple[str, int | None]]  # (host, port); port None = any port
    origins: frozenset[str]  # exact origins allowed beside those on an allowed host
    any_host: bool = False

    @classmethod
    def of(cls, api, canonical_url: str, web_host: str) -> Door:
        """The allowed lists of a worker: its settings' plus the loopback names, bind host and canonical host."""
        names = [*LOOPBACK_HOSTS, *api.allowed_hosts]
        if web_host.strip() not in WILDCARD_HOSTS:
            names.append(f"[{web_host}]" if ":" in web_host and not web_host.startswith("[") else web_host)
        canonical = URL(str(canonical_url)).host if canonical_url else None
        if canonical:
            names.append(f"[{canonical}]" if ":" in canonical else canonical)
        hosts = frozenset(p for p in (split_host(n) for n in names if n != ANY) if p is not None)
        origins = frozenset(_origin(o) for o in api.allowed_origins if _origin(o))
        return cls(hosts, origins, ANY in api.allowed_hosts)

    def host_allowed(self, host: str, port: int | None) -> bool:
        return self.any_host or (host, None) in self.hosts or (host, port) in self.hosts

    def host_refusal(self, value: str | None) -> str | None:
        """Why a Host header is refused, or None when it is allowed."""
        if not value:
            return "the request names no Host"
        parts = split_host(value)
        if parts is None:
            return f"malformed Host {value[:100]!r}"
        if not self.host_allowed(*parts):
            return (f"Host {value[:100]!r} is not served here: add it to CREDENCE_API__ALLOWED_HOSTS if "
                    "clients reach this worker by that name")
        return None

    def origin_refusal(self, value: str | None) -> str | None:
        """Why an Origin header is refused, or None when it is absent or allowed."""
        if value is None:
            return None
        origin = _origin(value)
        if origin and origin in self.origins:
            return None
        if origin:
            url = URL(origin)
            host = f"[{url.host}]" if ":" in (url.host or "") else (url.host or "")
            if (host, url.explicit_port) in self.hosts or (host, None) in self.hosts:
                return None
        return (f"Origin {value[:100]!r} may not call this port: add it to CREDENCE_API__ALLOWED_ORIGINS if "
                "a page there should")

    def refusal(self, headers) -> ApiError | None:
        reason = self.host_refusal(headers.get("Host"))
        if reason is not None:
            return ApiError(421, reason)
        reason = self.origin_refusal(headers.get("Origin"))
        if reason is not None:
            return ApiError(403, reason)
        return None

    def transport_security(self) -> TransportSecuritySettings:
        """The MCP SDK's DNS rebinding protection with the same lists (patterns "host:*" for any port)."""
        hosts, origins = [], sorted(self.origins)
        for host, port in sorted(self.hosts, key=str):
            hosts += [host, f"{host}:*"] if port is None else [f"{host}:{port}"]
            for scheme in ("http", "https"):
                origins += [f"{scheme}://{host}", f"{scheme}://{host}:*"] if port is None else [
                    f"{scheme}://{host}:{port}"]
        # With any Host allowed the SDK cannot check Origin alone; the door (middleware) still does.
        return TransportSecuritySettings(enable_dns_rebinding_protection=not self.any_host,
                                         allowed_hosts=hosts, allowed_origins=origins)


def _origin(value: str) -> str | None:
    """scheme://host[:port], lowercased, or None for anything else ("null", paths, other schemes)."""
    try:
        url = URL(value.strip().lower().rstrip("/"))
    except ValueError:
        return None
    if url.scheme not in ("http", "https") or not url.host or url.path not in ("", "/") or url.query_string:
        return None
    if url.user or url.fragment:
        return None
    return str(url.origin())


def middleware(door: Door):
    """An aiohttp middleware refusing what `door` refuses, before any handler (every route of the port)."""

    @web.middleware
    async def check(request, handler):
        refused = door.refusal(request.headers)
        if refused is not None:
            return error_response(refused)
        return await handler(request)

    return check
