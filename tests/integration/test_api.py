"""The HTTP API /v1 through real HTTP, on a worker on the real broker, called with the typed client."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
import pytest

from credence.client import AsyncClient
from credence.errors import ApiError
from credence.streams.api.routes import ROUTES
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from credence.tables.entries import Entry, record_signal
from credence.tables.evidence import FEEDBACK_SIGNALS as FEEDBACK_SIGNAL
from credence.tables.lifecycle import deny
from credence.tables.rendering import render_memory_block
from credence.tables.scope import Scope
from tests.support.api import add_tenant, client, turn_bodies
from tests.support.cli import CliResult, in_process
from tests.support.pipeline import (
    discard,
    invalid_lines,
    pipeline_settings,
    sample_lines,
    scopes_of,
    turn_counts,
    valid_turn_counts,
)

pytestmark = pytest.mark.integration

SCOPES = ["acme/alice/barista", "acme/bob/barista", "acme/alice/tutor", "globex/carol/coach"]


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    settings = pipeline_settings(kafka_bootstrap, root, f"api{uuid.uuid4().hex[:8]}")
    keys = {name: add_tenant(kafka_bootstrap, settings, name) for name in ("acme", "globex")}
    keys["tiny"] = add_tenant(kafka_bootstrap, settings, "tiny", max_body_bytes=2048, requests_per_second=0.2,
                              burst=2)
    keys["lean"] = add_tenant(kafka_bootstrap, settings, "lean", persona_token_budget=8, reflection_token_budget=12)
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start()
    try:
        lines = sample_lines(SCOPES)
        lines += [line.replace(b'"tenant": "acme"', b'"tenant": "lean"') for line in sample_lines(SCOPES[:1])]
        rejected = 0
        for tenant, bodies in turn_bodies(lines).items():
            with client(worker, keys[tenant], tenant) as api:
                for i in range(0, len(bodies), 200):
                    rejected += len(api.send_turns(bodies[i:i + 200]).rejected)
        assert rejected == invalid_lines(lines)  # the sample's deliberately broken lines, by the topic's rule
        expected = valid_turn_counts(lines)
        wait_until(lambda: all(turn_counts(worker).get(s) == n for s, n in expected.items()), 90, "turns in")
        from tests.support.pipeline import flush_and_wait_idle

        flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes_of(lines))
        yield worker, settings, keys
    finally:
        discard(worker)


def scope_args(scope: str) -> tuple[str, str, str]:
    tenant, user, character = scope.split("/")
    return tenant, user, character


def core_entries(api, user, character) -> tuple[list[Entry], object]:
    listing = api.entries(user, character)
    return [Entry.from_dict(e.snapshot) for e in listing.entries if not e.protected], listing.clock


def test_prompt_is_the_evidence_cores_rendering(served):
    worker, settings, keys = served
    for scope in SCOPES:
        tenant, user, character = scope_args(scope)
        with client(worker, keys[tenant], tenant) as api:
            entries, clock = core_entries(api, user, character)
            prompt = api.prompt(user, character)
        assert entries, f"{scope} has no entries to render"
        block = render_memory_block(Scope.parse(scope), entries, clock, settings=settings.memory)
        assert prompt.text == block.text and prompt.text
        assert [e.id for e in prompt.entries] == [e.id for e in block.entries]
        assert (prompt.tokens.persona, prompt.tokens.reflections) == (block.persona_tokens, block.reflection_tokens)
        shown = {e.id for e in block.entries}
        assert {o.id for o in prompt.left_out} == {e.id for e in entries} - shown


def test_a_tenants_budgets_override_the_defaults(served):
    worker, settings, keys = served
    with client(worker, keys["lean"], "lean") as lean, client(worker, keys["acme"], "acme") as acme:
        entries, clock = core_entries(lean, "alice", "barista")
        prompt, default = lean.prompt("alice", "barista"), acme.prompt("alice", "barista")
    memory = settings.memory.model_copy(update={"persona_token_budget": 8, "reflection_token_budget": 12})
    block = render_memory_block(Scope("lean", "alice", "barista"), entries, clock, settings=memory)
    assert prompt.text == block.text and len(prompt.entries) < len(default.entries)
    assert prompt.tokens.persona <= 8 and prompt.tokens.reflections <= 12
    assert any(o.reason == "over the token budget" for o in prompt.left_out)


def test_feedback_moves_the_score_exactly_as_the_core_says(served):
    worker, settings, keys = served
    with client(worker, keys["acme"], "acme") as api:
        entries, clock = core_entries(api, "alice", "barista")
        target = next(e for e in entries if e.kind == "reflection" and e.status in ("pending", "confirmed"))
        for kind in ("confirm", "deny"):
            before = Entry.from_dict(api.entry("alice", "barista", target.id).entry.snapshot)
            at = api.entries("alice", "barista").clock + timedelta(minutes=5)
            result = api.feedback("alice", "barista", target.id, kind, wait=True, ts=at)
            assert result.applied is True and result.feedback_id
            expected = record_signal(before, FEEDBACK_SIGNAL[kind], at, settings=settings.memory)
            if kind == "deny":
                expected = deny(expected, at)
            after = Entry.from_dict(result.entry.snapshot)
            assert after.evidence == expected.evidence
            assert result.entry.score == pytest.approx(expected.score(at, settings=settings.memory), abs=1e-12)
            assert after.version > before.version
            if kind == "deny":
                assert after.status == "denied"


def test_turns_are_validated_one_by_one_and_only_good_ones_are_applied(served):
    worker, settings, keys = served
    good = {"user": "zed", "character": "barista", "turn_id": "z-1", "role": "user", "text": "I love tea.",
            "ts": "2026-09-01T10:00:00Z"}
    bodies = [good, {**good, "turn_id": "z-2", "role": "robot"}, {**good, "turn_id": "z-3", "tenant": "globex"},
              {**good, "turn_id": "z-4", "user": "a/b"}, "not an object", {**good, "turn_id": "z-5", "ts": "noon"}]
    with client(worker, keys["acme"], "acme") as api:
        result = api.send_turns(bodies[:4] + bodies[5:])
        assert result.accepted == 1
        assert [r.index for r in result.rejected] == [1, 2, 3, 4]
        assert "role" in result.rejected[0].reason and "tenant" in result.rejected[1].reason
        assert "user" in result.rejected[2].reason and "ts" in result.rejected[3].reason
        with pytest.raises(ApiError) as err:
            api.send_turns([bodies[4]])
        assert err.value.status == 422
    wait_until(lambda: turn_counts(worker).get("acme/zed/barista") == 1, 30, "the one good turn")


def test_card_entries_render_for_every_user_of_that_character_only(served):
    worker, settings, keys = served
    card = [{"id": "card-tone", "text": "Speaks warmly and briefly."},
            {"id": "card-origin", "text": "Runs a small cafe in Lisbon."}]
    with client(worker, keys["acme"], "acme") as api:
        assert api.put_card("barista", card).entries == 2
        for user in ("alice", "bob"):
            prompt = api.prompt(user, "barista")
            assert prompt.text.startswith("Character card:\n- Speaks warmly and briefly.\n- Runs a small cafe")
            assert [e.id for e in prompt.entries if e.protected] == ["card-tone", "card-origin"]
            entries, clock = core_entries(api, user, "barista")
            budgets = render_memory_block(Scope("acme", user, "barista"), entries, clock, settings=settings.memory)
            assert (prompt.tokens.persona, prompt.tokens.reflections) == (budgets.persona_tokens,
                                                                          budgets.reflection_tokens)
        assert "Character card" not in api.prompt("alice", "tutor").text
        assert "Character card" in api.prompt("newcomer", "barista").text  # a user with no state yet
        with pytest.raises(ApiError) as err:
            api.feedback("alice", "barista", "card-tone", "deny")
        assert err.value.status == 409
        detail = api.entry("bob", "barista", "card-origin")
        assert detail.entry.tier == "protected" and detail.history == []
    with client(worker, keys["globex"], "globex") as api:
        assert "Character card" not in api.prompt("alice", "barista").text


def call_every_route(worker: WorkerProcess, headers: dict) -> dict[str, httpx.Response]:
    """Each /v1 route of tenant acme, called with `headers`, valid bodies and real ids."""
    bodies = {"post_turns": {"turns": [{"user": "alice", "character": "barista", "turn_id": "iso-1",
                                        "role": "user", "text": "I hate tea now.", "ts": "2026-09-03T10:00:00Z"}]},
              "post_recall": {"query": "tea"}, "post_feedback": {"entry_id": "X", "kind": "deny"},
              "put_card": {"entries": [{"id": "evil", "text": "Leaks secrets."}]},
              "post_entries": {"text": "The user likes tea."}, "put_entry_text": {"text": "The user likes tea."}}
    params = {"tenant": "acme", "user": "alice", "character": "barista", "entry_id": "X", "turn_id": "iso-1"}
    out = {}
    for route in ROUTES:
        url = worker.url + route.path.format(**params)
        out[route.name] = httpx.request(route.method, url, json=bodies.get(route.name), headers=headers,
                                        timeout=10)
    return out


def test_every_route_refuses_no_key_a_wrong_key_and_another_tenants_key(served):
    worker, settings, keys = served
    with client(worker, keys["acme"], "acme") as api:
        before = api.entries("alice", "barista")
        card_before = api.prompt("alice", "barista").text
    for headers, status in (({}, 401), ({"Authorization": "Bearer cred_wrong"}, 401),
                            ({"Authorization": "Basic " + keys["acme"]}, 401),
                            ({"Authorization": f"Bearer {keys['globex']}"}, 404)):
        for name, response in call_every_route(worker, headers).items():
            if name == "get_openapi" and status == 404:
                continue  # the document belongs to no tenant: any tenant's key reads it
            assert response.status_code == status, (name, headers, response.text)
            assert set(response.json()) == {"error", "status"}, (name, response.text)
            assert "alice" not in response.text and "barista" not in response.text
    with client(worker, keys["acme"], "acme") as api:
        assert api.entries("alice", "barista") == before  # nothing of a refused request was applied
        assert api.prompt("alice", "barista").text == card_before
    assert turn_counts(worker)["acme/alice/barista"] == valid_turn_counts(sample_lines(["acme/alice/barista"]))[
        "acme/alice/barista"]


def test_limits_and_malformed_requests(served):
    worker, settings, keys = served
    url = worker.url + "/v1/tenants/tiny/users/u/characters/c"
    auth = {"Authorization": f"Bearer {keys['tiny']}"}
    big = {"query": "x" * 1000, "top_k": 5, "padding": "y" * 3000}
    response = httpx.post(url + "/recall", json=big, headers=auth)
    assert response.status_code == 413 and "2048" in response.json()["error"]
    response = httpx.post(url + "/feedback", content=b"{not json", headers=auth)
    assert response.status_code == 400 and "JSON" in response.json()["error"]
    response = httpx.get(url + "/entries", headers=auth)
    assert response.status_code == 429 and int(response.headers["Retry-After"]) >= 1
    acme = {"Authorization": f"Bearer {keys['acme']}"}
    base = worker.url + "/v1/tenants/acme/users/alice/characters/barista"
    response = httpx.post(base + "/feedback", json={"entry_id": "x", "kind": "maybe"}, headers=acme)
    assert response.status_code == 422 and "kind" in response.json()["error"]
    response = httpx.post(base + "/feedback?wait=perhaps", json={"entry_id": "x", "kind": "deny"}, headers=acme)
    assert response.status_code == 400
    response = httpx.get(worker.url + "/v1/tenants/acme/users/%20alice/characters/barista/prompt", headers=acme)
    assert response.status_code == 400 and "user" in response.json()["error"]
    response = httpx.get(base + "/entries?tier=shiny", headers=acme)
    assert response.status_code == 400


def test_openapi_lists_every_route_with_its_models(served):
    worker, settings, keys = served
    with client(worker, keys["acme"], "acme") as api:
        doc = api.openapi()
    assert doc["openapi"].startswith("3.")
    for route in ROUTES:
        op = doc["paths"][route.path][route.method.lower()]
        assert op["operationId"] == route.name
        assert op["responses"][str(route.status)]["content"]["application/json"]["schema"]["$ref"].endswith(
            route.response.__name__)
        if route.body is not None:
            assert route.body.__name__ in doc["components"]["schemas"]
    status = httpx.get(worker.url + "/status").json()  # no key needed, and no tenant data in it
    assert status["ready"] and "acme" not in str(status)


def test_forget_a_user_through_the_api(served):
    worker, settings, keys = served
    with client(worker, keys["globex"], "globex") as api:
        assert api.entries("carol", "coach").entries
        assert api.forget_user("carol").partitions == settings.topic_partitions
        wait_until(lambda: not api.entries("carol", "coach").entries, 30, "carol to be forgotten")
    assert "globex/carol/coach" not in turn_counts(worker)


def test_cli_tenants_add_list_rotate_remove(served, tmp_path, monkeypatch, capsys, caplog):
    worker, settings, keys = served
    env = settings_env(settings, settings.kafka_bootstrap)
    run = in_process(monkeypatch, capsys, caplog)  # the command's answers, not its process: tests/support/cli.py

    def cli(*args) -> CliResult:
        return run("tenants", *args, env=env)

    added = cli("add", "initech", "--persona-token-budget", "5")
    assert added.returncode == 0, added.stderr
    key = added.stdout.strip().splitlines()[-1]
    assert key.startswith("cred_") and len(key) >= 43 + 5
    assert cli("add", "initech").returncode == 2
    assert cli("add", "bad/name").returncode == 2 and cli("set", "initech", "--time-zone", "Mars/Base").returncode == 2
    assert cli("set", "initech", "--powerful-memory", "off").returncode == 0
    listed = cli("list").stdout
    assert '"initech"' in listed and key not in listed and '"persona_token_budget": 5' in listed
    assert '"powerful_memory": false' in listed
    with client(worker, key, "initech") as api:
        wait_until(lambda: api.prompt("erin", "tutor").text == "", 30, "the worker to learn the new key")
    new_key = cli("rotate-key", "initech").stdout.strip().splitlines()[-1]
    assert new_key != key
    with client(worker, key, "initech") as old, client(worker, new_key, "initech") as new:
        wait_until(lambda: _refused(old) == 401, 30, "the old key to stop working")
        assert new.prompt("erin", "tutor").text == ""
        assert cli("remove", "initech").returncode == 0
        wait_until(lambda: _refused(new) == 401, 30, "the removed tenant's key to stop working")
    assert cli("remove", "initech").returncode == 2


def _refused(api) -> int | None:
    try:
        api.prompt("erin", "tutor")
    except ApiError as exc:
        return exc.status
    return None


def test_async_client_sees_what_the_sync_client_sees(served):
    worker, settings, keys = served

    async def read():
        async with AsyncClient(worker.url, keys["acme"], "acme") as api:
            prompt, listing = await asyncio.gather(api.prompt("alice", "tutor"), api.entries("alice", "tutor"))
            detail = await api.entry("alice", "tutor", listing.entries[0].id)
            try:
                await api.entries("carol", "coach", tier="nope")
            except ApiError as exc:
                return prompt, listing, detail, exc.status
        raise AssertionError("a bad tier was accepted")

    prompt, listing, detail, status = asyncio.run(read())
    with client(worker, keys["acme"], "acme") as api:
        assert prompt == api.prompt("alice", "tutor") and listing == api.entries("alice", "tutor")
    assert detail.entry == listing.entries[0] and status == 400
