"""POST /mcp on a real worker and broker, through the MCP SDK's own client: the tools answer as their
/v1 routes do, for the tenant of the bearer key only; a bad key, another tenant's scope and invalid
arguments are refused with the reason, and nothing of a refused call is written."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import httpx
import pytest

from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.api import add_tenant, client, mcp_session
from tests.support.pipeline import (
    discard,
    flush_and_wait_idle,
    pipeline_settings,
    start_together,
    topic_values,
    turn_counts,
)

pytestmark = pytest.mark.integration

TOOLS = {"add_turns", "get_prompt", "recall", "list_entries", "get_entry", "give_feedback", "get_recent",
         "delete_entry", "remember", "edit_entry", "turn_status"}
TEXTS = ["I love green tea.", "I am learning Rust.", "My cat is named Miso.", "I live in Lisbon."]
SCOPE = "acme/alice/barista"


def turns(user: str, character: str = "barista") -> list[dict]:
    return [{"user": user, "character": character, "turn_id": f"{user}-{i}", "role": "user", "text": text,
             "ts": f"2026-05-0{i + 1}T10:00:00Z"} for i, text in enumerate(TEXTS)]


def call(worker: WorkerProcess, key: str | None, name: str, arguments: dict):
    async def go():
        async with mcp_session(worker.url, key) as session:
            return await session.call_tool(name, arguments)
    return asyncio.run(go())


def error_text(result) -> str:
    assert result.is_error, result
    return " ".join(c.text for c in result.content)


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    settings = pipeline_settings(kafka_bootstrap, root, f"mcp{uuid.uuid4().hex[:8]}")
    keys = {name: add_tenant(kafka_bootstrap, settings, name) for name in ("acme", "globex")}
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start()
    try:
        added = call(worker, keys["acme"], "add_turns", {"turns": turns("alice")})
        answer = added.structured_content
        assert not added.is_error and (answer["accepted"], answer["rejected"]) == (len(TEXTS), [])
        assert [t["turn_id"] for t in answer["turns"]] == [t["turn_id"] for t in turns("alice")] and answer["token"]
        wait_until(lambda: turn_counts(worker).get(SCOPE) == len(TEXTS), 90, "the MCP turns to be applied")
        flush_and_wait_idle(worker, kafka_bootstrap, settings, [SCOPE])
        yield worker, settings, keys
    finally:
        discard(worker)


def test_lists_the_tools_with_schemas(served):
    worker, _, keys = served

    async def go():
        async with mcp_session(worker.url, keys["acme"]) as session:
            return (await session.list_tools()).tools
    tools = {t.name: t for t in asyncio.run(go())}
    assert set(tools) == TOOLS
    assert all(t.input_schema["type"] == "object" and t.output_schema["type"] == "object" for t in tools.values())
    assert tools["recall"].input_schema["properties"]["top_k"]["default"] == 5
    assert set(tools["give_feedback"].input_schema["properties"]["kind"]["enum"]) == {"confirm", "deny"}


def test_every_tool_answers_as_its_v1_route(served):
    worker, settings, keys = served
    scope = {"user": "alice", "character": "barista"}
    with client(worker, keys["acme"], "acme") as api:
        answer = call(worker, keys["acme"], "get_prompt", scope)
        prompt = answer.structured_content
        assert prompt["text"] and prompt == api.prompt("alice", "barista").model_dump(mode="json")
        assert json.loads(answer.content[0].text) == prompt  # the same JSON as text, for text-only clients
        # use that counts: what a served memory block rendered counts as a use (source "prompt"), applied by the stream
        rendered = [e["id"] for e in prompt["entries"] if not e["protected"]]
        assert rendered
        wait_until(lambda: all("prompt" in api.entry("alice", "barista", i).entry.snapshot["usage"]["reinforced_sources"]
                               for i in rendered), 30, "the prompt's usage record to be applied")
        listing = call(worker, keys["acme"], "list_entries", scope).structured_content
        assert listing["entries"] and listing == api.entries("alice", "barista").model_dump(mode="json")
        tier = listing["entries"][0]["tier"]
        only = call(worker, keys["acme"], "list_entries", {**scope, "tier": tier}).structured_content
        assert only["entries"] and {e["tier"] for e in only["entries"]} == {tier}
        target = next(e for e in listing["entries"] if "tea" in e["text"].lower())
        detail = call(worker, keys["acme"], "get_entry", {**scope, "entry_id": target["id"]}).structured_content
        assert detail["history"] and detail == api.entry("alice", "barista", target["id"]).model_dump(mode="json")
        hits = call(worker, keys["acme"], "recall", {**scope, "query": "green tea"}).structured_content["hits"]
        assert hits and hits[0]["id"] == target["id"] and len(hits) <= 5
        # recall's hits become a usage record (source "recall"), as the /v1 route's do
        wait_until(lambda: any(u["source"] == "recall" and target["id"] in u["entry_ids"]
                               for u in topic_values(worker.bootstrap, settings, "usage")), 30, "the usage record")
        answer = call(worker, keys["acme"], "give_feedback", {**scope, "entry_id": target["id"], "kind": "confirm"})
        assert not answer.is_error and answer.structured_content["feedback_id"]
        wait_until(lambda: api.entry("alice", "barista", target["id"]).entry.version > target["version"], 30,
                   "the confirmation to be applied by the stream")


def test_a_missing_or_wrong_key_is_refused_before_any_tool_runs(served):
    worker, settings, keys = served
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "add_turns", "arguments": {"turns": turns("mallory")}}}
    for headers in ({}, {"Authorization": "Bearer cred_not-a-key"}, {"Authorization": keys["acme"]}):
        response = httpx.post(worker.url + "/mcp", json=message, headers={
            **headers, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
        assert response.status_code == 401 and "key" in response.json()["error"], response.text
    with pytest.raises(Exception):
        call(worker, "cred_not-a-key", "get_prompt", {"user": "alice", "character": "barista"})
    flush_and_wait_idle(worker, worker.bootstrap, settings, [SCOPE])
    assert not [t for t in topic_values(worker.bootstrap, settings, "turns") if t["user"] == "mallory"]


def test_malformed_requests_with_a_good_key_are_refused_with_a_4xx(served):
    worker, settings, keys = served
    auth = {"Authorization": f"Bearer {keys['acme']}", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18"}
    for body, content_type in ((b"not json", "application/json"), (b"[]", "application/json"),
                               (b'{"jsonrpc": "2.0"}', "application/json"), (b"{}", "text/plain"),
                               (b"x" * (settings.api.max_body_bytes + 1), "application/json")):
        response = httpx.post(worker.url + "/mcp", content=body, headers={**auth, "Content-Type": content_type})
        assert 400 <= response.status_code < 500, (body[:20], response.status_code, response.text)
    assert not call(worker, keys["acme"], "get_prompt", {"user": "alice", "character": "barista"}).is_error


def test_another_tenants_scope_is_not_found(served):
    worker, settings, keys = served
    with client(worker, keys["acme"], "acme") as api:
        acme = api.entries("alice", "barista").entries[0]
    scope = {"user": "alice", "character": "barista"}
    assert "no entry" in error_text(call(worker, keys["globex"], "get_entry", {**scope, "entry_id": acme.id}))
    assert "no entry" in error_text(call(worker, keys["globex"], "give_feedback",
                                         {**scope, "entry_id": acme.id, "kind": "deny"}))
    prompt = call(worker, keys["globex"], "get_prompt", scope).structured_content  # globex's own, empty scope
    assert prompt["entries"] == [] and acme.text not in prompt["text"]
    assert call(worker, keys["globex"], "list_entries", scope).structured_content["entries"] == []
    assert call(worker, keys["globex"], "recall", {**scope, "query": "green tea"}).structured_content["hits"] == []
    smuggled = call(worker, keys["globex"], "add_turns", {"turns": [{**turns("alice")[0], "tenant": "acme"}]})
    assert "'tenant'" in error_text(smuggled) and smuggled.structured_content["accepted"] == 0
    assert not [f for f in topic_values(worker.bootstrap, settings, "feedback") if f["tenant"] == "globex"]


@pytest.mark.parametrize("name, arguments, reason", [
    ("recall", {"user": "alice", "character": "barista", "query": "tea", "top_k": 0}, "top_k"),
    ("recall", {"user": "alice", "character": "barista", "query": ""}, "query"),
    ("get_prompt", {"user": "alice"}, "character"),
    ("get_prompt", {"user": "al/ice", "character": "barista"}, "user"),
    ("list_entries", {"user": "alice", "character": "barista", "tier": "gold"}, "tier"),
    ("give_feedback", {"user": "alice", "character": "barista", "entry_id": "x", "kind": "maybe"}, "kind"),
    ("give_feedback", {"user": "alice", "character": "barista", "entry_id": "no-such", "kind": "deny"}, "no entry"),
    ("add_turns", {"turns": [{**turns("alice")[0], "turn_id": "bad", "text": 7}]}, "text"),
    ("add_turns", {"turns": "hello"}, "turns"),
    ("get_recent", {"user": "alice", "character": "barista", "max_tokens": 0}, "max_tokens"),
    ("delete_entry", {"user": "alice", "character": "barista", "entry_id": "no-such"}, "no entry"),
    ("edit_entry", {"user": "alice", "character": "barista", "entry_id": "no-such", "text": "The user likes tea."},
     "no entry"),
    ("remember", {"user": "alice", "character": "barista", "text": "It was great."}, "statement"),
    ("forget_everything", {}, "no tool"),
])
def test_invalid_arguments_are_tool_errors_with_the_reason_and_write_nothing(served, name, arguments, reason):
    worker, settings, keys = served
    before = {t: len(topic_values(worker.bootstrap, settings, t)) for t in ("turns", "feedback", "usage")}
    assert reason in error_text(call(worker, keys["acme"], name, arguments))
    assert {t: len(topic_values(worker.bootstrap, settings, t)) for t in before} == before


def test_the_stdio_command_serves_the_same_tools(served, tmp_path):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    worker, _, keys = served
    key_file = tmp_path / "key"
    key_file.write_text(keys["acme"] + "\n")
    command = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "credence.streams.ops.cli", "mcp", "--url", worker.url, "--key-file", str(key_file)])
    scope = {"user": "alice", "character": "barista"}
    stderr = tmp_path / "stderr"

    async def go():
        with stderr.open("w") as errlog:
            async with stdio_client(command, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                return await calls(session)

    async def calls(session):
        await session.initialize()
        tools = (await session.list_tools()).tools
        return (tools, await session.call_tool("get_prompt", scope),
                await session.call_tool("get_entry", {**scope, "entry_id": "no-such"}))

    tools, prompt, missing = asyncio.run(go())
    # Quiet by default: a stdio client shows its server's stderr to its user (before: a line per request).
    assert " INFO " not in stderr.read_text(), stderr.read_text()[-2000:]
    assert {t.name for t in tools} == TOOLS
    assert prompt.structured_content == call(worker, keys["acme"], "get_prompt", scope).structured_content
    assert prompt.structured_content["text"] and "no entry" in error_text(missing)


def test_tools_are_answered_by_the_scopes_owner(kafka_bootstrap, tmp_path):
    from credence.streams.ops.broker import free_port
    from credence.streams.ops.replay import send_control
    from tests.integration.test_api_routing import USERS, held
    from tests.integration.test_api_routing import turns as user_turns

    settings = pipeline_settings(kafka_bootstrap, tmp_path, f"mcprt{uuid.uuid4().hex[:8]}", topic_partitions=4)
    key = add_tenant(kafka_bootstrap, settings, "acme")
    second = settings.model_copy(update={"web_port": free_port(), "data_dir": tmp_path / "data2"})
    workers = start_together([WorkerProcess(settings, kafka_bootstrap, tmp_path / "w1.log"),
                              WorkerProcess(second, kafka_bootstrap, tmp_path / "w2.log")])
    scopes = [f"acme/{u}/barista" for u in USERS]
    try:
        added = call(workers[0], key, "add_turns", {"turns": [t for u in USERS for t in user_turns(u)]})
        assert added.structured_content["accepted"] == len(USERS) * len(TEXTS)
        wait_until(lambda: all(set(held(w)) for w in workers) and set().union(*map(held, workers)) == set(scopes)
                   and all(v["turns"] == len(TEXTS) for w in workers for v in held(w).values()), 120,
                   "the scopes to be split between the two workers")
        asyncio.run(send_control(kafka_bootstrap, settings, scopes, "flush"))
        wait_until(lambda: all(v["idle"] and v["entries"] for w in workers for v in held(w).values()), 90,
                   "every scope to have entries and be idle")
        scope = next(s for s in scopes if s in held(workers[1]))  # owned by the second worker
        user = scope.split("/")[1]
        view = workers[1].get(f"/scope/{scope}")
        args = {"user": user, "character": "barista"}
        # asked of the first worker, answered with the owner's data
        assert call(workers[0], key, "get_prompt", args).structured_content["text"] == view["memory_block"]
        target = call(workers[0], key, "list_entries", args).structured_content["entries"][0]
        assert target["id"] in {e["id"] for e in view["entries"]}
        answer = call(workers[0], key, "give_feedback", {**args, "entry_id": target["id"], "kind": "confirm"})
        assert not answer.is_error, answer
        wait_until(lambda: call(workers[0], key, "get_entry", {**args, "entry_id": target["id"]})
                   .structured_content["entry"]["version"] > target["version"], 30, "the owner to apply it")
    finally:
        for worker in workers:
            discard(worker)
