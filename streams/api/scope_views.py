"""The scope views behind the API's keys: GET /scopes (what this worker holds, counts per scope) and
GET /scope/{tenant}/{user}/{character} (one scope's state, entry texts included).

A tenant key reads only its own tenant's scopes, as /v1 does: /scopes lists only them and another
tenant's /scope/… is 404, the answer an unknown scope gets. The operator key (CREDENCE_API__OPERATOR_KEY,
unset by default) reads every tenant's: the demo, the tests and the benchmarks use it. No key: 401.
"""

from __future__ import annotations

from credence.errors import ApiError, StateError
from credence.streams.api.auth import NOT_FOUND
from credence.streams.api.http import error_response, json_response
from credence.streams.runtime.views import is_operator, scope_view
from credence.tables.scope import scope_key, tenant_of
from credence.tables.tokens import default_token_counter


def register(api) -> None:
    credence = api.credence
    app, settings, store = credence.app, credence.settings, credence.store
    count_tokens = default_token_counter()

    def reader(request) -> str | None:
        """None for the operator (every tenant), else the tenant of the request's key (401/429)."""
        if is_operator(request.headers, settings.api.operator_key):
            return None
        return api.authenticate(request).name

    @app.page("/scopes")
    async def scopes(web, request):
        try:
            tenant = reader(request)
            summaries = [(scope, store.summary(scope)) for scope in store.scopes()
                         if tenant is None or tenant_of(scope) == tenant]
        except ApiError as exc:
            return error_response(exc)
        except StateError as exc:
            # While a rebalance's recovery is still reading changelogs, one table can be ahead of another.
            return json_response(503, {"error": f"scope state is being recovered; try again ({exc})", "status": 503})
        summaries = [(scope, c) for scope, c in summaries if c is not None]
        return json_response(200, {
            "turn_counts": {scope: c.turns for scope, c in summaries},
            "scopes": {scope: {"turns": c.turns, "entries": store.entry_count(scope), "idle": c.idle,
                               "queued": c.queued, "requests": c.requests}
                       for scope, c in summaries},
        })

    @app.page("/scope/{tenant}/{user}/{character}")
    async def scope(web, request, tenant: str, user: str, character: str):
        try:
            caller = reader(request)
            if caller is not None and caller != tenant:
                raise ApiError(404, NOT_FOUND)  # another tenant's scope: as if it did not exist
        except ApiError as exc:
            return error_response(exc)
        key = scope_key(tenant, user, character)  # unchecked: a malformed path is an unknown scope
        state = store.get(key)
        if state is None:
            return json_response(404, {"error": f"unknown scope {key} on this worker", "status": 404})
        return json_response(200, scope_view(state, settings.memory, count_tokens))
