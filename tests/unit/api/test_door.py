"""The port's door (streams/api/door.py): which Host and Origin a request may carry, and the same lists
handed to the MCP SDK's DNS rebinding protection."""

from __future__ import annotations

import pytest
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.requests import Request

from credence.config.api import ApiSettings
from credence.streams.api.door import Door

CANONICAL = "http://10.0.0.7:6066"


def door(**api) -> Door:
    return Door.of(ApiSettings(**api), CANONICAL, "0.0.0.0")


@pytest.mark.parametrize("host", ["localhost:6066", "127.0.0.1:6066", "[::1]:6066", "LOCALHOST", "10.0.0.7:6066"])
def test_loopback_names_and_the_canonical_host_are_served(host):
    assert door().host_refusal(host) is None


@pytest.mark.parametrize("host", ["rebound.example:6066", "10.0.0.8:6066", "", None, "a b", "[::1]x",
                                  "localhost.rebound.example", "127.0.0.1.nip.io:6066", "evil/x"])
def test_any_other_host_is_refused_with_a_reason(host):
    reason = door().host_refusal(host)
    assert reason and ("Host" in reason or "host" in reason.lower())
    refused = door().refusal({"Host": host} if host is not None else {})
    assert refused is not None and refused.status == 421


def test_configured_hosts_with_or_without_a_port_and_the_bind_host():
    configured = door(allowed_hosts="worker, api.example:443")
    assert configured.host_refusal("worker:6066") is None and configured.host_refusal("api.example:443") is None
    assert configured.host_refusal("api.example:444") is not None
    assert Door.of(ApiSettings(), CANONICAL, "192.168.1.5").host_refusal("192.168.1.5:6066") is None
    assert door(allowed_hosts="*").host_refusal("anything.example") is None


@pytest.mark.parametrize("origin", [None, "http://127.0.0.1:6066", "http://localhost:3000", "https://[::1]:1",
                                    "http://10.0.0.7:6066"])
def test_no_origin_or_one_on_an_allowed_host_passes(origin):
    headers = {"Host": "127.0.0.1:6066"} | ({"Origin": origin} if origin else {})
    assert door().refusal(headers) is None


@pytest.mark.parametrize("origin", ["http://rebound.example", "null", "file://", "http://127.0.0.1.rebound.example",
                                    "ftp://localhost", "http://localhost/path", ""])
def test_a_present_origin_not_allowed_is_403_with_a_reason(origin):
    refused = door().refusal({"Host": "127.0.0.1:6066", "Origin": origin})
    assert refused is not None and refused.status == 403 and "Origin" in refused.reason


def test_configured_origins_are_exact_and_any_host_still_checks_origin():
    configured = door(allowed_origins="https://app.example", allowed_hosts="*")
    assert configured.origin_refusal("https://app.example") is None
    assert configured.origin_refusal("https://APP.example/") is None
    assert configured.origin_refusal("http://app.example") is not None
    assert configured.refusal({"Host": "x.example", "Origin": "https://evil.example"}).status == 403


def sdk_verdict(settings, host: str, origin: str | None) -> int | None:
    headers = [(b"host", host.encode()), (b"content-type", b"application/json")]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    request = Request({"type": "http", "method": "POST", "path": "/mcp", "headers": headers})
    import asyncio

    response = asyncio.run(TransportSecurityMiddleware(settings).validate_request(request, is_post=True))
    return None if response is None else response.status_code


def test_the_mcp_sdk_gets_the_same_lists():
    settings = door(allowed_hosts="worker", allowed_origins="https://app.example").transport_security()
    assert settings.enable_dns_rebinding_protection
    assert sdk_verdict(settings, "127.0.0.1:6066", None) is None
    assert sdk_verdict(settings, "worker:6066", "https://app.example") is None
    assert sdk_verdict(settings, "10.0.0.7:6066", "http://localhost:3000") is None
    assert sdk_verdict(settings, "rebound.example:6066", None) == 421
    assert sdk_verdict(settings, "127.0.0.1:6066", "http://rebound.example") == 403


def test_the_mcp_endpoint_runs_the_sdks_protection_with_the_doors_lists():
    from types import SimpleNamespace

    from credence.streams.api.mcp_server import McpEndpoint

    endpoint = McpEndpoint(SimpleNamespace(door=door(allowed_hosts="worker")))
    security = endpoint.manager.security_settings
    assert security is not None and security.enable_dns_rebinding_protection
    assert "worker:*" in security.allowed_hosts and "http://localhost:*" in security.allowed_origins


# Every route a worker's web port serves, and who may read it. A new route fails this test until it is
# placed here: behind the tenant key (/v1, /mcp, the scope views) or carrying no tenant data.
KEYED = {"/v1/", "/mcp", "/scopes", "/scope/"}
TENANT_FREE = {"/", "/status", "/metrics", "/browser", "/browser/browser.js", "/browser/browser.css"}


def test_every_route_on_the_port_is_known_and_behind_the_door(tmp_path):
    from credence.config import load_settings
    from credence.streams.ops.worker import build_worker

    credence = build_worker(load_settings(data_dir=tmp_path, table_store="memory"), "localhost:1")
    web = credence.app.web
    web.init_server()
    paths = {route.resource.canonical for route in web.web_app.router.routes()}
    unknown = {p for p in paths if p not in TENANT_FREE and not p.startswith(tuple(KEYED))}
    assert not unknown, f"routes neither keyed nor known to carry no tenant data: {sorted(unknown)}"
    assert not any(p.startswith(("/table", "/router")) for p in paths)  # Faust's own table pages are off
    assert [m.__qualname__ for m in web.web_app.middlewares] == ["middleware.<locals>.check"]
