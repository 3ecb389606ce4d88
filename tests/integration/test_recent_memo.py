"""The recent conversation memo through a real worker and broker on the production path:
an `openai` backend against the test server, so every summary is a call and its answer a record on
credence.control. One module-scoped worker:

- past the threshold the older turns become the memo; GET …/recent serves it with the newest turns within
  ?max_tokens= (validated), beside the memory block, and that render is a use (a usage record, source prompt);
- only the tenant's own key reads it (another tenant's key: 404; none: 401), and the MCP tool answers as the
  route does;
- replay-equal: the worker's local store deleted and restored from the changelogs serves the same memo and
  turns, and the model is never asked for a summary again.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from pathlib import Path

import pytest

from credence.config.llm import LLMSettings
from credence.errors import ApiError
from credence.streams.llm.prompts import recent_summary
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.api import add_tenant, client, mcp_session
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.pipeline import FAST_GROUP_ENV, discard, flush_and_wait_idle, pipeline_settings, topic_values

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

SCOPE = "acme/rita/guide"
LINES = ["I am learning the cello.", "Lovely. Who teaches you?", "My teacher is called Anna.", "Is she strict?",
         "I love green tea.", "Do you enjoy it?", "I want to join a quartet.", "That sounds like a plan.",
         "I also adopted a kitten named Biscuit.", "Tell me about Biscuit!"]
MEMORY = {"recent_compress_threshold_items": 6, "recent_history_max_items": 3, "recent_max_items": 12}


def turns() -> list[dict]:
    return [{"user": "rita", "character": "guide", "turn_id": f"t{i:02d}", "role": "user" if i % 2 == 0 else "ai",
             "text": text, "ts": f"2026-05-01T10:{i:02d}:00Z"} for i, text in enumerate(LINES)]


def summaries(server: OpenAICompatibleServer) -> int:
    return sum(n for (task, _), n in server.models_seen.items() if task == recent_summary.NAME)


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("recent")
    with OpenAICompatibleServer() as server:
        llm = LLMSettings(backend="openai", base_url=server.base_url, model=server.model, timeout_s=30)
        settings = pipeline_settings(kafka_bootstrap, root, f"rc{uuid.uuid4().hex[:8]}", llm=llm, memory=MEMORY)
        keys = {name: add_tenant(kafka_bootstrap, settings, name) for name in ("acme", "globex")}
        worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log", extra_env=FAST_GROUP_ENV).start()
        run = {"worker": worker, "settings": settings, "keys": keys, "server": server, "root": root}
        try:
            with client(worker, keys["acme"], "acme") as api:
                assert api.send_turns(turns()).accepted == len(LINES)
            flush_and_wait_idle(worker, kafka_bootstrap, settings, [SCOPE])
            yield run
        except BaseException:
            print((root / "worker.log").read_text(errors="replace")[-4000:])
            raise
        finally:
            discard(run["worker"])  # the last test replaces it with a restored one


def test_over_the_threshold_the_older_turns_become_the_memo_served_within_a_budget(served):
    worker, settings, keys = served["worker"], served["settings"], served["keys"]
    with client(worker, keys["acme"], "acme") as api:
        recent = api.recent("rita", "guide")
        assert summaries(served["server"]) >= 1  # asked of the model server, answered through the log
        assert recent.memo and "cello" in recent.memo and recent.memo_turns >= 5
        ids = [t.turn_id for t in recent.turns]
        assert ids == [f"t{i:02d}" for i in range(10 - len(ids), 10)] and len(ids) <= 6  # the newest, in order
        assert recent.memo_turns + len(ids) == len(LINES) and recent.left_out_turns == 0
        assert recent.memory.text and recent.memory.entries  # the memory block beside it
        tight = api.recent("rita", "guide", max_tokens=12)
        assert tight.tokens <= 12 and tight.memo is None and [t.turn_id for t in tight.turns] == ["t09"]
        for bad in ("0", "x", "100001"):
            with pytest.raises(ApiError) as refused:
                api._send(api.routes.recent("rita", "guide", bad))
            assert refused.value.status == 400 and "max_tokens" in str(refused.value)
    rendered = {e.id for e in recent.memory.entries if not e.protected}

    def counted():  # GET …/prompt was never called: the usage record is /recent's
        records = [r for r in topic_values(settings.kafka_bootstrap, settings, "usage") if r["user"] == "rita"]
        return [r for r in records if r["source"] == "prompt" and set(r["entry_ids"]) == rendered] or None
    wait_until(counted, 60, "the /recent render's usage record")


def test_only_the_tenants_own_key_reads_it_and_the_mcp_tool_answers_as_the_route(served):
    worker, keys = served["worker"], served["keys"]
    with client(worker, keys["globex"], "acme") as other, client(worker, None, "acme") as anonymous:
        for api, status in ((other, 404), (anonymous, 401)):
            with pytest.raises(ApiError) as refused:
                api.recent("rita", "guide")
            assert refused.value.status == status

    async def tool():
        async with mcp_session(worker.url, keys["acme"]) as session:
            return await session.call_tool("get_recent", {"user": "rita", "character": "guide", "max_tokens": 40})
    answer = asyncio.run(tool())
    assert not answer.is_error
    with client(worker, keys["acme"], "acme") as api:
        route = api.recent("rita", "guide", max_tokens=40).model_dump(mode="json")
    got = answer.structured_content
    assert (got["memo"], got["turns"], got["tokens"]) == (route["memo"], route["turns"], route["tokens"])


def test_a_store_restored_from_the_changelogs_serves_the_same_memo_without_asking_again(served, kafka_bootstrap):
    worker, settings, keys, server = served["worker"], served["settings"], served["keys"], served["server"]
    with client(worker, keys["acme"], "acme") as api:
        before = api.recent("rita", "guide").model_dump(include={"memo", "memo_turns", "turns"})
    asked = summaries(server)
    worker.kill()  # a crash, too: everything it decided was committed with its state
    shutil.rmtree(Path(settings.data_dir) / "worker")
    again = WorkerProcess(settings, kafka_bootstrap, served["root"] / "again.log", extra_env=FAST_GROUP_ENV).start()
    served["worker"] = again  # the fixture stops whichever runs last
    with client(again, keys["acme"], "acme") as api:
        after = wait_until(lambda: _recent(api), 90, "the restored scope to be served")
    assert after == before and summaries(server) == asked


def _recent(api) -> dict | None:
    try:
        return api.recent("rita", "guide").model_dump(include={"memo", "memo_turns", "turns"})
    except ApiError:
        return None  # 503 while the restored worker recovers its tables
