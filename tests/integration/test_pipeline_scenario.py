"""A scripted three-week conversation through the real broker and worker (rules backend), whose end
state is computed by hand here from the seed's numbers — not by calling the domain functions."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaProducer

from credence.config.pipeline import PipelineSettings
from credence.kafka import client_options
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, wait_until
from tests.support.pipeline import discard, pipeline_settings
from tests.support.turns import read_topic

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
END = T0 + timedelta(days=21, hours=2)  # the last turn: 2026-03-22 12:00


def at(days: float, minutes: int = 0) -> datetime:
    return T0 + timedelta(days=days, minutes=minutes)


def decayed(counter: float, since: datetime, now: datetime, half_life_days: float) -> float:
    return counter * 0.5 ** ((now - since).total_seconds() / 86400 / half_life_days)


# (day, minute, scope user, role, text, surfaced entry — by the text it was synthesised from)
PHASE_ONE = [
    (0, 0, "u1", "user", "I love green tea.", None),        # importance 8 -> R1 seeded 0.4
    (0, 5, "u2", "user", "I love green tea.", None),        # same words, another scope: its own entry
    (1, 0, "u1", "user", "I live in Porto.", None),         # importance 9 -> R2 seeded 0.6
    (2, 0, "u1", "user", "I love green tea.", None),        # R1 +0.5
    (2, 5, "u2", "user", "I love green tea.", None),
    (3, 0, "u1", "user", "I am learning Rust.", None),      # importance 6 -> R3 seeded 0
]
PHASE_TWO = [
    (4, 0, "u1", "ai", "Green tea again?", "The user loves green tea."),
    (4, 1, "u1", "user", "yes, exactly", None),             # confirm R1 +1.0 -> 1.9 -> confirmed
    (6, 0, "u1", "user", "I love green tea.", None),        # R1 +0.5 -> 2.4 -> promoted (persona P)
    (6, 5, "u2", "user", "I love green tea.", None),        # u2's R1' -> 1.4 -> confirmed
]
PHASE_THREE = [
    (8, 0, "u1", "ai", "You live in Porto, right?", "The user lives in Porto."),
    (8, 1, "u1", "user", "no, that's wrong", None),         # deny R2 +1.0 d -> denied
    (10, 0, "u1", "ai", "How is Rust going?", "The user is learning Rust."),
    (10, 1, "u1", "user", "tell me a story", None),         # ignore R3 -0.2
    (12, 0, "u1", "user", "I love green tea.", None),       # P: 3rd lifetime reinforce -> +1.0 (combo)
    (21, 120, "u1", "user", "ok", None),
    (21, 120, "u2", "user", "ok", None),
]


def scope(user: str) -> str:
    return f"acme/{user}/barista"


def records(script, ids: dict[str, str], offset: int) -> list[tuple[bytes, bytes]]:
    out = []
    for n, (day, minute, user, role, text, surfaced) in enumerate(script, offset):
        rec = {"v": 1, "tenant": "acme", "user": user, "character": "barista", "turn_id": f"turn-{n}",
               "role": role, "text": text, "ts": at(day, minute).isoformat().replace("+00:00", "Z")}
        if surfaced:
            rec["surfaced_ids"] = [ids[surfaced]]
        out.append((scope(user).encode(), json.dumps(rec).encode()))
    return out


async def produce(bootstrap: str, topic: str, batch: list[tuple[bytes, bytes]], copies: int) -> None:
    producer = AIOKafkaProducer(**client_options(bootstrap, acks="all"))
    await producer.start()
    try:
        for key, value in batch:
            for _ in range(copies):
                await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


def consume_all(bootstrap: str, settings, name: str) -> list[dict]:
    """Every committed record of a credence topic, decoded: read up to the partitions' ends (once no
    transaction is open), not until a poll comes back empty."""
    records = asyncio.run(read_topic(bootstrap, settings.topic(name), settings.topic_partitions, settings.kafka))
    return [json.loads(r.value) for r in records]


def idle(worker: WorkerProcess, turns: int):
    s = worker.get("/status")
    done = s["stats"]["turns_accepted"] >= turns and s["busy_scopes"] == 0 and s["llm"]["inflight"] == 0
    return s if done else None


def entries_by_text(worker: WorkerProcess, user: str) -> dict[str, dict]:
    view = worker.get(f"/scope/{scope(user)}")
    return {f"{e['kind']}:{e['text']}": e for e in view["entries"]}


def run_script(settings, bootstrap, tmp_path, copies: int):
    asyncio.run(ensure_topics(bootstrap, settings))
    worker = WorkerProcess(settings, bootstrap, tmp_path / f"worker-{copies}.log").start(ready_timeout_s=120)
    try:
        topic, sent, ids = settings.topic("turns"), 0, {}
        for phase in (PHASE_ONE, PHASE_TWO, PHASE_THREE):
            asyncio.run(produce(bootstrap, topic, records(phase, ids, sent), copies))
            sent += len(phase)
            # Promotion runs beside the scope; let it land before the conversation moves on. The ids
            # the character surfaces next are those the worker gave the entries.
            status = wait_until(lambda: idle(worker, sent), 60, f"{sent} turns to settle")
            ids = {e["text"]: e["id"] for e in worker.get(f"/scope/{scope('u1')}")["entries"]}
        assert status["stats"]["turns_duplicate"] == (copies - 1) * sent
        return entries_by_text(worker, "u1"), entries_by_text(worker, "u2"), \
            consume_all(bootstrap, settings, "archive")
    finally:
        discard(worker)


SCENARIO_PIPELINE = PipelineSettings(stage1_max_batch=1, ticks_advance_clock=False, tick_interval_seconds=1.0)


@pytest.fixture
def scenario_settings(settings_factory):
    def make(**kw):
        return settings_factory(topic_partitions=2, pipeline=SCENARIO_PIPELINE, **kw)
    return make


@pytest.fixture(scope="module")
def delivered_once(kafka_bootstrap, tmp_path_factory):
    """The script delivered once (u1's entries, u2's, the archive): what the hand-computed state is checked
    against, and what a twice-delivered run must equal. One run for the module: both tests read it."""
    root = tmp_path_factory.mktemp("once")
    settings = pipeline_settings(kafka_bootstrap, root, f"s{uuid.uuid4().hex[:10]}", pipeline=SCENARIO_PIPELINE)
    return run_script(settings, kafka_bootstrap, root, copies=1)


def assert_expected_end_state(u1: dict, u2: dict, archived: list[dict]) -> None:
    tea, porto, rust = "The user loves green tea.", "The user lives in Porto.", "The user is learning Rust."

    r1 = u1[f"reflection:{tea}"]
    ev = r1["snapshot"]["evidence"]
    assert r1["status"] == "promoted"
    assert (ev["reinforcement"], ev["disputation"], ev["user_fact_reinforce_count"]) == (2.4, 0.0, 2)
    assert r1["score"] == pytest.approx(decayed(2.4, at(6), END, 30), abs=1e-6)  # 1.693792
    assert r1["tier"] == "confirmed"  # tier follows the score; the stored status is never demoted

    persona = u1[f"persona:{tea}"]
    pev = persona["snapshot"]["evidence"]
    assert persona["status"] == "active"
    assert persona["snapshot"]["merged_from_ids"] == [r1["id"]]
    # created at promotion with R1's counters (2.4), then the 3rd lifetime reinforce: 0.5 + 0.5 combo
    assert pev["reinforcement"] == pytest.approx(3.4, abs=1e-9)
    assert pev["user_fact_reinforce_count"] == 3
    assert persona["score"] == pytest.approx(decayed(3.4, at(12), END, 30), abs=1e-6)  # 2.756346
    assert persona["tier"] == "promoted"

    r3 = u1[f"reflection:{rust}"]
    assert r3["status"] == "pending"
    assert r3["snapshot"]["evidence"]["reinforcement"] == pytest.approx(-0.2, abs=1e-9)
    assert r3["snapshot"]["evidence"]["sub_zero_days"] == 12  # 03-11 .. 03-22, once per calendar day
    assert r3["score"] == pytest.approx(decayed(-0.2, at(10, 1), END, 30), abs=1e-6)
    assert r3["tier"] == "pending"

    # R2: denied on 03-09, below zero every day since, archived on its 14th day (03-22)
    assert f"reflection:{porto}" not in u1
    (gone,) = [a for a in archived if a["entry"]["text"] == porto]
    assert gone["entry"]["status"] == "archived"
    assert gone["entry"]["evidence"]["sub_zero_days"] == 14
    assert gone["entry"]["evidence"]["disputation"] == 1.0 and gone["entry"]["evidence"]["reinforcement"] == 0.6
    assert gone["archived_at"].startswith("2026-03-22")
    expected = decayed(0.6, at(1), at(21, 0) - timedelta(hours=10), 30) - decayed(1.0, at(8, 1), at(21) - timedelta(hours=10), 180)
    assert expected < 0 and len(archived) == 1

    # u2 never saw feedback: 0.4 + 0.5 + 0.5 stored; confirmed at 1.4, decayed below 1 by the end
    r1b = u2[f"reflection:{tea}"]
    assert r1b["id"] != r1["id"]  # evidence never crosses scopes
    assert r1b["status"] == "confirmed"
    assert r1b["snapshot"]["evidence"]["reinforcement"] == pytest.approx(1.4, abs=1e-9)
    assert r1b["score"] == pytest.approx(decayed(1.4, at(6, 5), END, 30), abs=1e-6)
    assert r1b["tier"] == "pending"
    assert set(u2) == {f"reflection:{tea}"}


def test_scripted_conversation_reaches_the_hand_computed_state(delivered_once):
    assert_expected_end_state(*delivered_once)


def test_duplicate_deliveries_give_the_same_state(delivered_once, scenario_settings, kafka_bootstrap, tmp_path):
    once = delivered_once
    twice = run_script(scenario_settings(), kafka_bootstrap, tmp_path, copies=2)
    assert_expected_end_state(*twice)
    strip = lambda d: {k: (v["status"], v["snapshot"]["evidence"], v["version"]) for k, v in d.items()}  # noqa: E731
    assert strip(once[0]) == strip(twice[0]) and strip(once[1]) == strip(twice[1])


# -- a denial racing a slow promotion --------------------------------------------------------------
# R1 reaches 2.4 with the third turn below and enters merge-on-promote; the character surfaces it at
# once and the user denies it while the merge call runs. The seed: a late promotion result never
# overwrites a newer denial. The order of records decides: the reply is on the partition before the
# merge answer can be, whatever the model's latency (the openai run holds the merge answer back).
TEA = "The user loves green tea."
RACE = [
    [(0, 0, "u1", "user", "I love green tea.", None),       # R1 seeded 0.4
     (2, 0, "u1", "user", "I love green tea.", None)],      # +0.5 -> 0.9
    [(4, 0, "u1", "ai", "Green tea again?", TEA),
     (4, 1, "u1", "user", "yes, exactly", None)],           # confirm +1.0 -> 1.9 confirmed
    [(6, 0, "u1", "user", "I love green tea.", None),       # +0.5 -> 2.4: merge-on-promote starts
     (6, 1, "u1", "ai", "So green tea is your thing?", TEA),
     (6, 2, "u1", "user", "no, that's wrong", None)],       # denied while the merge call runs
]


def run_race(settings, bootstrap, tmp_path, server=None):
    from credence.streams.scope.requests import reflection_id

    asyncio.run(ensure_topics(bootstrap, settings))
    ids = {TEA: reflection_id(scope("u1"), TEA)}
    worker = WorkerProcess(settings, bootstrap, tmp_path / "worker-race.log").start(ready_timeout_s=120)
    try:
        topic, sent = settings.topic("turns"), 0
        for phase in RACE:
            asyncio.run(produce(bootstrap, topic, records(phase, ids, sent), 1))
            sent += len(phase)
            if server is not None and phase is RACE[-1]:
                # The merge answer is held: the reflection is denied while its promotion is in flight.
                wait_until(lambda: any(r.task == "merge_decision" for r in server.records), 60, "a merge call")
                wait_until(lambda: entries_by_text(worker, "u1")[f"reflection:{TEA}"]["status"] == "denied",
                           60, "the denial while the merge answer is held")
                assert idle(worker, sent) is None  # the promotion is still in flight
                server.release_delayed()
            wait_until(lambda: idle(worker, sent), 60, f"{sent} turns to settle")
        return entries_by_text(worker, "u1"), consume_all(bootstrap, settings, "evidence")
    finally:
        discard(worker)


def assert_denial_won(u1: dict, journal: list[dict]) -> None:
    r1 = u1[f"reflection:{TEA}"]
    ev = r1["snapshot"]["evidence"]
    assert r1["status"] == "denied" and r1["snapshot"]["merged_into_id"] is None
    assert (ev["reinforcement"], ev["disputation"]) == (pytest.approx(2.4, abs=1e-9), 1.0)
    assert [k for k in u1 if k.startswith("persona:")] == []  # no persona entry, no merge
    mine = [j for j in journal if j["entry_id"] == r1["id"]]
    assert [j["event"] for j in mine].count("promote_attempt") == 1  # the promotion did run
    assert [j for j in journal if j["event"] == "merged" or j["to_status"] == "promoted"] == []
    (denied,) = [j for j in mine if j["to_status"] == "denied"]
    assert denied["cause"] == "user_deny"


def test_a_denial_racing_a_promotion_wins_rules(scenario_settings, kafka_bootstrap, tmp_path):
    # The merge answer through the runner and the result topics, as a model server's comes: answered in
    # the batch (the rules default) it is never in flight, and the denial applies to what it decided
    # (tests/unit/runtime/test_inline_answers.py).
    from credence.config.llm import LLMSettings

    u1, journal = run_race(scenario_settings(llm=LLMSettings(inline_in_process=False)), kafka_bootstrap, tmp_path)
    assert_denial_won(u1, journal)


def test_a_denial_racing_a_slow_promotion_wins_openai(scenario_settings, kafka_bootstrap, tmp_path):
    from credence.config.llm import LLMSettings
    from credence.streams.llm.prompts import merge_decision
    from tests.support.openai_server import OpenAICompatibleServer

    with OpenAICompatibleServer(delay_tasks=[merge_decision.NAME], delay_timeout_s=60) as server:
        llm = LLMSettings(backend="openai", base_url=server.base_url, model=server.model, timeout_s=90,
                          max_retries=0)
        u1, journal = run_race(scenario_settings(llm=llm), kafka_bootstrap, tmp_path, server)
        assert server.violations == []
        assert server.outcomes(merge_decision.NAME) == {"ok": 1}
    assert_denial_won(u1, journal)
