"""The read-only memory browser: a static page (HTML, CSS and a small script, no build step, nothing
from a CDN) served by every worker at GET /browser. The page holds no data: it asks the /v1 API for a
scope's entries and an entry's signal history with the tenant key the user pastes, so the API's auth,
tenant isolation and owner routing apply to everything it shows. It never sends anything but GET."""

from __future__ import annotations

from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

ASSETS = {  # path -> (file, content type)
    "/browser": ("browser.html", "text/html; charset=utf-8"),
    "/browser/browser.js": ("browser.js", "text/javascript; charset=utf-8"),
    "/browser/browser.css": ("browser.css", "text/css; charset=utf-8"),
}
HEADERS = {
    # Only this origin's own files and API; no inline script, no framing, no referrer carrying the page.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def asset(name: str) -> bytes:
    return files("credence.streams.serving").joinpath("static", name).read_bytes()


def register(credence: Credence) -> None:
    """Mount /browser and its assets."""
    app = credence.app
    for path, (name, content_type) in ASSETS.items():
        body = asset(name)  # read once at start: a missing file fails the worker's start, not a request

        async def page(web, request, body=body, content_type=content_type):
            # aiohttp refuses a content_type with a charset; the full type goes in as a header.
            return web.bytes(body, headers=HEADERS | {"Content-Type": content_type})

        app.page(path, name="browser_" + name.replace(".", "_"))(page)
