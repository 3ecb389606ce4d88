"""Web views of a worker: /status and /scopes (read-only)."""

from __future__ import annotations

from dataclasses import asdict

from credence import __version__


def is_ready(app) -> bool:
    """Partitions assigned and table recovery finished: the worker is consuming."""
    try:
        recovered = app.tables.recovery.completed.is_set()
    except AttributeError:
        recovered = True
    return bool(recovered and not app.rebalancing)


def register(credence) -> None:
    app, tables = credence.app, credence.tables

    @app.page("/status")
    async def status(web, request):
        return web.json({
            "service": "credence", "version": __version__, "app_id": credence.settings.app_id,
            "ready": is_ready(app), "stats": asdict(credence.stats),
        })

    @app.page("/scopes")
    async def scopes(web, request):
        return web.json({"turn_counts": dict(tables["turn_counts"].items())})
