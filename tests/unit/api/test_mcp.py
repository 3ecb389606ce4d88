"""The MCP tools are the /v1 routes: each names its route, validates its arguments with the reason, and
asks the scope's owner through the same forwarding; the ASGI bridge hands the SDK one whole request."""

import asyncio
import json
from datetime import UTC, datetime

import pytest
from aiohttp.test_utils import make_mocked_request

from credence.errors import ApiError
from credence.streams.api import asgi, mcp_tools
from credence.streams.api.tenants import Tenant

CALLER = Tenant(name="acme", key_hash="x", created_at=datetime(2026, 1, 1, tzinfo=UTC))


class FakeRouter:
    def __init__(self, owner_answer=None) -> None:
        self.owner_answer, self.asked = owner_answer, []

    async def ask(self, scope, method, path, query, authorization, body):
        self.asked.append((scope, method, path, query, authorization, body))
        return self.owner_answer


class FakeApi:
    def __init__(self, owner_answer=None) -> None:
        self.router, self.answered = FakeRouter(owner_answer), []

    async def answer(self, route, caller, params, body, query, authorization=""):
        self.answered.append((route.name, params, body, query))
        return 200, route.response.model_construct()


def run(api, name, arguments):
    return asyncio.run(mcp_tools.run(api, CALLER, "Bearer k", name, arguments))


def test_every_tool_is_a_v1_route_and_reads_are_gets():
    assert [t.name for t in mcp_tools.TOOLS] == ["add_turns", "get_prompt", "recall", "list_entries", "get_entry",
                                                  "give_feedback", "get_recent", "delete_entry", "remember",
                                                  "edit_entry", "turn_status"]
    for tool in mcp_tools.TOOLS:
        assert tool.read_only == (tool.v1.method == "GET")
        assert tool.v1.by_owner == (tool.name != "add_turns")
        assert mcp_tools.input_schema(tool)["type"] == mcp_tools.output_schema(tool)["type"] == "object"


def test_a_scope_tool_asks_the_owner_with_the_routes_path_body_and_the_callers_key():
    api = FakeApi(owner_answer=(200, b'{"hits": []}'))
    assert run(api, "recall", {"user": "al ice", "character": "barista", "query": "tea"}) == {"hits": []}
    assert api.router.asked == [("acme/al ice/barista", "POST", "/v1/tenants/acme/users/al ice/characters/barista"
                                 "/recall", {}, "Bearer k", b'{"query":"tea","top_k":5}')]
    assert api.answered == []


def test_the_owners_refusal_is_the_tools_refusal():
    api = FakeApi(owner_answer=(404, b'{"error": "no entry \'e1\' in this scope", "status": 404}'))
    with pytest.raises(ApiError) as refused:
        run(api, "get_entry", {"user": "alice", "character": "barista", "entry_id": "e1"})
    assert (refused.value.status, refused.value.reason) == (404, "no entry 'e1' in this scope")


def test_an_owned_scope_is_answered_here_with_the_tenant_from_the_key():
    api = FakeApi()
    run(api, "list_entries", {"user": "alice", "character": "barista", "tier": "pending"})
    run(api, "add_turns", {"turns": [{"user": "alice"}]})
    (entries, params, _, query), (turns, turn_params, body, _) = api.answered
    assert (entries, params, query) == ("get_entries", {"tenant": "acme", "user": "alice", "character": "barista"},
                                        {"tier": "pending"})
    assert (turns, turn_params, body.turns) == ("post_turns", {"tenant": "acme"}, [{"user": "alice"}])


def test_delete_and_remember_ask_the_owner_with_the_routes_path_query_and_body():
    api = FakeApi(owner_answer=(202, b'{"remember_id": "rem-1", "fact_id": "f_1"}'))
    run(api, "delete_entry", {"user": "alice", "character": "barista", "entry_id": "r-1", "reason": "wrong"})
    run(api, "remember", {"user": "alice", "character": "barista", "text": "The user likes tea.", "importance": 7})
    (_, method, path, query, _, body), (_, method2, path2, _, _, body2) = api.router.asked
    assert (method, path, query, body) == ("DELETE", "/v1/tenants/acme/users/alice/characters/barista/entries/r-1",
                                           {"by": "user", "reason": "wrong"}, None)
    assert (method2, path2) == ("POST", "/v1/tenants/acme/users/alice/characters/barista/entries")
    assert json.loads(body2) == {"text": "The user likes tea.", "importance": 7, "by": "user"}


@pytest.mark.parametrize("name, arguments, status, reason", [
    ("remember", {"user": "a", "character": "b", "text": "x" * 1001}, 422, "text"),
    ("remember", {"user": "a", "character": "b", "text": "The user likes tea.", "importance": 0}, 422, "importance"),
    ("delete_entry", {"user": "a", "character": "b", "entry_id": "e", "reason": "x" * 201}, 422, "reason"),
    ("delete_entry", {"user": "a", "character": "b", "entry_id": ""}, 422, "entry_id"),
    ("recall", {"user": "a", "character": "b", "query": "q", "top_k": 101}, 422, "top_k"),
    ("give_feedback", {"user": "a", "character": "b", "entry_id": "e", "kind": "maybe"}, 422, "kind"),
    ("get_prompt", {"user": "a", "character": "b", "tenant": "globex"}, 422, "tenant"),
    ("get_prompt", {"user": "a/b", "character": "b"}, 400, "user"),
    ("nope", {}, 404, "no tool"),
])
def test_invalid_arguments_are_refused_with_the_reason_before_anything_runs(name, arguments, status, reason):
    api = FakeApi()
    with pytest.raises(ApiError) as refused:
        run(api, name, arguments)
    assert refused.value.status == status and reason in refused.value.reason
    assert api.router.asked == api.answered == []


def test_the_asgi_bridge_passes_the_whole_body_and_state_and_returns_the_response():
    async def app(scope, receive, send):
        message = await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"mcp-session-id", b"s1")]})
        await send({"type": "http.response.body", "body": message["body"] + scope["state"]["tag"].encode()})

    request = make_mocked_request("POST", "/mcp?x=1", headers={"Authorization": "Bearer k"})
    response = asyncio.run(asgi.call(app, request, b'{"a":1}', {"tag": "!"}))
    assert (response.status, response.body, response.headers["mcp-session-id"]) == (200, b'{"a":1}!', "s1")
    scope = asgi.scope_of(request, {})
    assert (scope["path"], scope["query_string"], scope["method"]) == ("/mcp", b"x=1", "POST")
    assert (b"authorization", b"Bearer k") in scope["headers"]
