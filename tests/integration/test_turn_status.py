"""Turn status and read-your-writes through a real worker and broker: a turn's state reaches `extracted`, a
POST with wait=applied is seen by the next read, the consistency token holds across a partition move."""

from __future__ import annotations

import uuid

import pytest
from aiokafka.partitioner import DefaultPartitioner

from credence.config.pipeline import PipelineSettings
from credence.errors import ApiError
from credence.streams.ops.broker import free_port
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.api import add_tenant, client
from tests.support.pipeline import FAST_GROUP_ENV, discard, pipeline_settings

pytestmark = pytest.mark.integration
PARTITIONS = 4
TENANT = "acme"


def partition_of(scope: str) -> int:
    parts = list(range(PARTITIONS))
    return DefaultPartitioner()(scope.encode(), parts, parts)


def turn(user: str, turn_id: str, text: str, minute: int = 0, **extra) -> dict:
    return {"user": user, "character": "barista", "turn_id": turn_id, "role": "user", "text": text,
            "ts": f"2026-05-01T10:{minute:02d}:00Z", **extra}


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("turn-status")
    # each user turn closes its Stage-1 window: with the in-process rules backend a turn is extracted in the
    # batch that applies it, so `extracted` is reached without a flush
    pipeline = PipelineSettings(ticks_advance_clock=False, tick_interval_seconds=1.0, stage1_max_batch=1)
    settings = pipeline_settings(kafka_bootstrap, root, f"ts{uuid.uuid4().hex[:8]}", topic_partitions=PARTITIONS,
                                 pipeline=pipeline)
    key = add_tenant(kafka_bootstrap, settings, TENANT)
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log", extra_env=FAST_GROUP_ENV).start()
    try:
        yield worker, settings, key, root
    finally:
        discard(worker)


def test_a_turn_reaches_extracted_and_a_read_after_wait_applied_sees_it(served):
    worker, _, key, _ = served
    with client(worker, key, TENANT) as api:
        sent = api.send_turns([turn("alice", "a1", "I love green tea and I drink it every morning.")],
                              wait="applied", timeout=30)
        assert sent.accepted == 1 and sent.reached is True
        (position,) = sent.turns
        assert position.partition == partition_of("acme/alice/barista") and position.offset >= 0
        assert sent.token == f"{position.partition}:{position.offset}"
        assert position.state in ("applied", "extracted")

        listing = api.entries("alice", "barista", after=sent.token, wait="applied", timeout=30)
        status = api.turn("alice", "barista", "a1", wait="extracted", timeout=30)
        assert status.state == "extracted" and status.reached is True
        assert (status.partition, status.offset) == (position.partition, position.offset)
        assert status.entry_ids, "the turn's fact made or touched no entry"
        assert set(status.entry_ids) <= {e.id for e in listing.entries}  # the read saw what the turn did
        prompt = api.prompt("alice", "barista", after=sent.token, wait="extracted", timeout=30)
        assert prompt.text

        # a retried turn (same id) answers a new position; its status is still the first one's
        again = api.send_turns([turn("alice", "a1", "I love green tea and I drink it every morning.")],
                               wait="applied", timeout=30)
        assert again.reached is True and again.turns[0].offset > position.offset
        assert api.turn("alice", "barista", "a1").offset == position.offset


def test_an_unknown_turn_is_404_and_one_past_the_owner_is_accepted_or_a_503_for_a_read(served):
    worker, _, key, _ = served
    with client(worker, key, TENANT) as api:
        with pytest.raises(ApiError) as unknown:
            api.turn("alice", "barista", "never-sent")
        assert unknown.value.status == 404 and "token" in unknown.value.reason
        future = f"{partition_of('acme/alice/barista')}:{10**12}"
        assert api.turn("alice", "barista", "never-sent", token=future).state == "accepted"
        with pytest.raises(ApiError) as late:
            api.entries("alice", "barista", after=future, timeout=0.3)
        assert late.value.status == 503 and late.value.headers.get("Retry-After") == "1"
        for query in ({"wait": "soon", "token": future}, {"wait": "applied"}, {"token": future},
                      {"wait": "applied", "token": "x"}, {"wait": "applied", "token": future, "timeout": "9999"}):
            answer = api._http.get("/v1/tenants/acme/users/alice/characters/barista/prompt", params=query)
            assert answer.status_code == 400 and answer.json()["error"], query


def test_add_turns_waits_over_mcp(served):
    import asyncio
    import json

    from tests.support.api import mcp_session

    worker, _, key, _ = served

    async def call():
        async with mcp_session(worker.url, key) as session:
            added = await session.call_tool("add_turns", {"turns": [turn("mia", "m1", "I play the cello.")],
                                                          "wait": "extracted", "timeout": 30})
            status = await session.call_tool("turn_status", {"user": "mia", "character": "barista",
                                                              "turn_id": "m1"})
            return json.loads(added.content[0].text), json.loads(status.content[0].text)

    added, status = asyncio.run(call())
    assert added["reached"] is True and added["turns"][0]["state"] == "extracted"
    assert status["state"] == "extracted"


def test_tags_filter_entries_recall_and_the_archive(served, tmp_path):
    import asyncio
    import json

    from credence.config.archive import ArchiveSettings
    from credence.sinks.analytics import query
    from credence.sinks.consumer import drain
    from credence.sinks.schema import EVIDENCE

    worker, settings, key, _ = served
    with client(worker, key, TENANT) as api:
        sent = api.send_turns([
            turn("tina", "t1", "I love hiking in the Alps every summer.", metadata={"tags": ["travel", "vip"]}),
            turn("tina", "t2", "I work as a nurse at the city hospital.", 1, metadata={"tags": ["work"]}),
            turn("tina", "t3", "My tag is broken.", 2, metadata={"tags": ["bad\ntag"]}),
        ], wait="extracted", timeout=30)
        assert sent.accepted == 2 and [r.index for r in sent.rejected] == [2]
        assert "metadata.tags" in sent.rejected[0].reason and sent.reached is True
        everything = api.entries("tina", "barista").entries
        travel = api.entries("tina", "barista", tag="travel").entries
        work = api.entries("tina", "barista", tag="work").entries
        assert travel and work and len(travel) + len(work) == len(everything)
        assert all("hiking" in e.text.lower() and e.tags == ["travel", "vip"] for e in travel)
        assert all("nurse" in e.text.lower() and e.tags == ["work"] for e in work)
        assert api.entries("tina", "barista", tag="nope").entries == []
        hits = api.recall("tina", "barista", "hiking nurse", tag="work").hits
        assert hits and {h.id for h in hits} <= {e.id for e in work} and all(h.tags == ["work"] for h in hits)
        assert {h.id for h in api.recall("tina", "barista", "hiking nurse").hits} >= {e.id for e in travel}
        with pytest.raises(ApiError) as bad:
            api.entries("tina", "barista", tag=" padded")
        assert bad.value.status == 400 and "tag" in bad.value.reason
    archive = ArchiveSettings(root=str(tmp_path / "archive"))
    asyncio.run(drain(settings.kafka_bootstrap, settings.topic("evidence"), EVIDENCE, archive))
    rows = json.loads(query(archive.root, "SELECT DISTINCT entry_id FROM evidence WHERE list_contains(tags, ?) "
                                          "ORDER BY entry_id", ["travel"], "json", archive))
    assert {r["entry_id"] for r in rows} == {e.id for e in travel}


def test_replay_waits_until_its_turns_are_applied_then_extracted(served, tmp_path):
    import asyncio
    import json

    from credence.streams.ops.replay import last_turns, replay, wait_committed, wait_extracted

    worker, settings, key, _ = served
    path = tmp_path / "turns.jsonl"
    lines = [{"v": 1, "tenant": TENANT, **turn(f"r{i}", f"r{i}-{n}", f"I grow tomatoes on balcony {n}.", n)}
             for i in range(3) for n in range(2)]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    written: dict[int, int] = {}
    assert asyncio.run(replay(path, settings.kafka_bootstrap, settings, progress=False, written=written)) == 6
    assert written and all(o >= 0 for o in written.values())
    asyncio.run(wait_committed(settings.kafka_bootstrap, settings, written, 60))
    with client(worker, key, TENANT) as api:  # committed: every turn is in its scope's state
        assert all(api.turn(f"r{i}", "barista", f"r{i}-1").state in ("applied", "extracted") for i in range(3))
    last = last_turns(path)
    assert sorted(last.values()) == ["r0-1", "r1-1", "r2-1"]
    asyncio.run(wait_extracted(worker.url, key, last, 60))
    with client(worker, key, TENANT) as api:
        assert all(api.turn(f"r{i}", "barista", f"r{i}-1").state == "extracted" for i in range(3))


def settled(call, what: str):
    """`call()` once no rebalance is under way: a 503 with Retry-After (partitions being assigned, a worker
    recovering its tables) is retried, as a client is told to; anything else fails the test."""
    def attempt():
        try:
            return call()
        except ApiError as exc:
            if exc.status != 503 or "Retry-After" not in (exc.headers or {}):
                raise
            return None
    return wait_until(attempt, 120, what, poll_s=1.0)


def _held(worker: WorkerProcess) -> set[int]:
    status = worker.get("/status")
    return set(status["state"]["held_partitions"]) if status["ready"] else set()


def test_the_token_holds_across_a_partition_move(served):
    """Turns applied by the first worker; a second joins and takes partitions: the token still reads at the
    new owner (the applied offsets travel with the scope's state), and a waiting POST sent to one worker
    waits on the other for the scopes it owns now."""
    worker, settings, key, root = served
    users = [f"u{i}" for i in range(8)]
    with client(worker, key, TENANT) as api:
        before = api.send_turns([turn(u, f"{u}-1", f"My name is {u} and I like jazz.") for u in users],
                                wait="applied", timeout=30)
        assert before.reached is True
    other = settings.model_copy(update={"web_port": free_port(), "data_dir": root / "data-2"})
    second = WorkerProcess(other, kafka_bootstrap_of(settings), root / "second.log", extra_env=FAST_GROUP_ENV)
    second.start(ready_timeout_s=120)
    try:
        wait_until(lambda: (a := _held(worker)) and (b := _held(second)) and not a & b
                   and a | b == set(range(PARTITIONS)), 120, "the partitions to split between the workers")
        moved = [u for u in users if partition_of(f"acme/{u}/barista") in _held(second)]
        assert moved, "no scope moved to the second worker"
        with client(worker, key, TENANT) as api, client(second, key, TENANT) as api2:
            for u in users:  # the old token, read at whichever worker owns the scope now
                for reader in (api, api2):
                    listing = settled(lambda r=reader, u=u: r.entries(u, "barista", after=before.token, wait="applied",
                                                                      timeout=30), f"{u}'s entries after the token")
                    assert listing.entries
                status = settled(lambda u=u: api2.turn(u, "barista", f"{u}-1"), f"{u}'s first turn")
                assert status.state in ("applied", "extracted")
            after = api.send_turns([turn(u, f"{u}-2", f"{u} moved to Lisbon last year.", 1) for u in moved],
                                   wait="applied", timeout=30)
            assert after.reached is True and {t.state for t in after.turns} <= {"applied", "extracted"}
            for u in moved:
                assert settled(lambda u=u: api2.turn(u, "barista", f"{u}-2"), f"{u}'s second turn").state in (
                    "applied", "extracted")
    finally:
        second.stop()  # graceful: the module's worker, in the same group, takes its partitions back


def kafka_bootstrap_of(settings) -> str:
    return settings.kafka_bootstrap
