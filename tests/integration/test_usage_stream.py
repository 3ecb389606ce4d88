"""Usage strength, validity and the bridge through the stream, on the real broker with a real worker (rules backend):

- a supersede (a merge that rewrites a persona's text) never overwrites: the journal holds the old meaning
  closed and the new one, and as-of reads return the version valid at each instant;
- recall hits on credence.usage reinforce exactly once per (source, UTC day), also when every record is
  delivered twice and when the worker is SIGKILLed and restarted;
- the gated daily sweep soft-archives an entry nobody recalls, and `credence memory restore` brings it back;
- `credence bridge nominate` refuses (exit 2, nothing emitted) while the bridge is off and emits exactly
  one candidate per nomination when it is on;
- an external consensus set through `PUT …/consensus` or `credence memory consensus` is journalled, shown in
  the entry's history, and at >= 0.75 exempts the entry from the usage sweep.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from credence.config.memory import MemorySettings
from credence.config.usage import BridgeSettings, TopicFilter, UsageSettings
from credence.kafka import client_options
from credence.streams.llm.embeddings import extra_installed
from credence.streams.ops.cli import main as cli
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from credence.streams.scope.requests import reflection_id
from credence.tables.entries import Entry
from credence.tables.validity import as_of
from tests.support.api import add_tenant
from tests.support.pipeline import (
    DEADLINE_S,
    FAST_GROUP_ENV,
    REPLAY_PIPELINE,
    discard,
    flush_and_wait_idle,
    idle_status,
    pipeline_settings,
    topic_values,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

SCOPE = "acme/ivy/guide"
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)
BERLIN = reflection_id(SCOPE, "The user lives in Berlin.")
PARIS = reflection_id(SCOPE, "The user lives in Paris.")
PERSONA = f"persona-{BERLIN}"


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def produce(settings, name: str, records: list[dict]) -> None:
    async def run():
        producer = AIOKafkaProducer(**client_options(settings.kafka_bootstrap, settings.kafka, acks="all"))
        await producer.start()
        try:
            for r in records:
                await producer.send_and_wait(settings.topic(name), json.dumps(r).encode(), key=SCOPE.encode())
        finally:
            await producer.stop()
    asyncio.run(run())


def scope_part() -> dict:
    tenant, user, character = SCOPE.split("/")
    return {"v": 1, "tenant": tenant, "user": user, "character": character}


def turn(text: str, at: datetime, role: str = "user", surfaced: list[str] | None = None) -> dict:
    return {**scope_part(), "turn_id": f"t-{uuid.uuid4().hex[:8]}", "role": role, "text": text, "ts": iso(at),
            **({"surfaced_ids": surfaced} if surfaced else {})}


def confirm(entry_id: str, at: datetime) -> dict:
    return {**scope_part(), "feedback_id": f"fb-{uuid.uuid4().hex[:8]}", "entry_id": entry_id,
            "decision": "confirm", "ts": iso(at)}


def hit(entry_id: str, at: datetime, source: str = "recall") -> dict:
    return {**scope_part(), "entry_ids": [entry_id], "source": source, "ts": iso(at)}


SCOPE_PATH = "/v1/tenants/acme/users/ivy/characters/guide"
ENTRIES = f"{SCOPE_PATH}/entries"


class Run:
    def __init__(self, settings, root, key):
        self.settings, self.root, self.worker, self.key = settings, root, None, key

    def post(self, path: str, body: dict) -> httpx.Response:
        return httpx.post(self.worker.url + path, json=body, headers={"Authorization": f"Bearer {self.key}"},
                          timeout=30.0)

    def start(self) -> None:
        self.worker = WorkerProcess(self.settings, self.settings.kafka_bootstrap, self.root / "worker.log",
                                    extra_env=FAST_GROUP_ENV).start()

    def entry(self, entry_id: str) -> Entry | None:
        view = self.worker.get(f"/scope/{SCOPE}")
        found = [e for e in view["entries"] if e["id"] == entry_id]
        return Entry.from_dict(found[0]["snapshot"]) if found else None

    def wait_entry(self, entry_id: str, condition, what: str) -> Entry:
        return wait_until(lambda: (e := self.entry(entry_id)) is not None and condition(e) and e, DEADLINE_S,
                          f"{entry_id} to be {what} (log: {self.worker.log_path})")

    def wait_idle(self) -> None:
        wait_until(lambda: idle_status(self.worker, [SCOPE]), DEADLINE_S, "the scope to idle")

    def usage_applied(self, marker_source: str) -> Entry:
        """Records of one scope are applied in order: once a marker hit sent last is in, all are."""
        produce(self.settings, "usage", [hit(BERLIN, T0 + timedelta(hours=23), marker_source)])
        return self.wait_entry(BERLIN, lambda e: marker_source in e.usage.reinforced_sources, "marked")


@pytest.fixture(scope="module")
def run(kafka_bootstrap, tmp_path_factory):
    """A scope whose persona entry was superseded: Berlin promoted, then Paris merged into it."""
    root = tmp_path_factory.mktemp("usage")
    bridge = BridgeSettings(bridge_enabled=True, ripe_min_age_days=1, ripe_min_reinforce_count=3,
                            topic_filters={"acme": TopicFilter(subjects=("home",))})
    # Correction work would decide the Paris reflection against the Berlin entry (keep_new: a new id);
    # this fixture follows the seed's own supersede, merge-on-promote.
    settings = pipeline_settings(kafka_bootstrap, root, f"u{uuid.uuid4().hex[:10]}",
                                 usage=UsageSettings(decay_enabled=True), bridge=bridge,
                                 memory=MemorySettings(correction_work_enabled=False),
                                 pipeline=REPLAY_PIPELINE.model_copy(update={"recall_warm_up": True}))
    r = Run(settings, root, add_tenant(kafka_bootstrap, settings, "acme"))
    r.start()
    try:
        produce(settings, "turns", [turn("I live in Berlin.", T0)])
        flush_and_wait_idle(r.worker, kafka_bootstrap, settings, [SCOPE])
        produce(settings, "feedback", [confirm(BERLIN, T0 + MIN), confirm(BERLIN, T0 + 2 * MIN)])
        r.wait_entry(PERSONA, lambda e: e.text == "The user lives in Berlin.", "promoted")
        later = T0 + timedelta(hours=20)
        # three mentions suppress the persona, so Stage-2 leaves the Paris fact to synthesis
        produce(settings, "turns", [turn("You live in Berlin, right?", later + i * MIN, "ai", [PERSONA])
                                    for i in range(3)] + [turn("I moved to Paris.", later + timedelta(hours=1))])
        flush_and_wait_idle(r.worker, kafka_bootstrap, settings, [SCOPE])
        r.wait_entry(PARIS, lambda e: True, "synthesised")
        at = later + timedelta(hours=1)
        produce(settings, "feedback", [confirm(PARIS, at + MIN), confirm(PARIS, at + 2 * MIN)])
        r.wait_entry(PERSONA, lambda e: e.text == "The user lives in Paris.", "merged")
        r.wait_idle()
        yield r
    except BaseException:
        print((root / "worker.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        discard(r.worker)


def persona_versions(settings) -> list[Entry]:
    return [Entry.from_dict(e["entry"]) for e in topic_values(settings.kafka_bootstrap, settings, "evidence")
            if e["entry_id"] == PERSONA]


def test_a_supersede_keeps_both_meanings_and_as_of_reads_the_right_one(run):
    versions = persona_versions(run.settings)
    (closed,) = [v for v in versions if v.invalidated_at is not None]
    assert closed.text == "The user lives in Berlin."
    switched = closed.invalidated_at
    assert as_of(versions, switched - timedelta(microseconds=1))[PERSONA].text == "The user lives in Berlin."
    now = as_of(versions, switched)[PERSONA]
    assert now.text == "The user lives in Paris." and now.valid_from == switched and now.invalidated_at is None
    assert sorted({v.version for v in versions}) == list(range(1, max(v.version for v in versions) + 1))
    live = run.entry(PERSONA)
    assert live.invalidated_at is None and live.text == "The user lives in Paris."

    def api_text(route: str, at: datetime) -> str:
        answer = httpx.get(f"{run.worker.url}/v1/tenants/acme/users/ivy/characters/guide/{route}",
                           params={"as_of": iso(at)}, headers={"Authorization": f"Bearer {run.key}"}, timeout=30)
        assert answer.status_code == 200, answer.text
        if route == "prompt":
            return answer.json()["text"]
        return {e["id"]: e["text"] for e in answer.json()["entries"]}.get(PERSONA, "")

    before = switched - timedelta(microseconds=1)
    assert api_text("entries", before) == "The user lives in Berlin." == as_of(versions, before)[PERSONA].text
    assert api_text("entries", switched) == "The user lives in Paris."
    # the prompt at an instant before the suppression (mentions at T0+20h), and one after it ended
    early, late = api_text("prompt", T0 + timedelta(hours=1)), api_text("prompt", T0 + timedelta(hours=30))
    assert "lives in Berlin" in early and "Paris" not in early
    assert "lives in Paris" in late and "Berlin" not in late


def test_usage_is_applied_once_per_source_and_day_through_duplicates_and_sigkill(run):
    # a recall through the API: the handler only emits; the scope's owner applies the hit
    assert run.entry(PERSONA).usage.reinforce_count == 0
    if extra_installed():  # the worker loads recall's model when it starts, not at the first recall
        wait_until(lambda: run.worker.get("/status")["embeddings"]["model_loaded"], 240,
                   "recall's embedding model to load at start")
    for _ in range(2):  # the second recall on the same UTC day emits again and changes nothing
        answer = run.post(f"{SCOPE_PATH}/recall", {"query": "where does the user live? Paris"})
        assert answer.status_code == 200, answer.text
        assert PERSONA in [h["id"] for h in answer.json()["hits"]]
    def recalls() -> list[dict]:
        return [u for u in topic_values(run.settings.kafka_bootstrap, run.settings, "usage") if u["source"] == "recall"]

    # the route answers before the broker acknowledges its usage record: wait for both to land
    emitted = wait_until(lambda: len(found := recalls()) >= 2 and found, DEADLINE_S, "both recalls' usage records")
    assert len(emitted) == 2 and all(PERSONA in u["entry_ids"] for u in emitted), emitted
    assert all(u["ts"].startswith("2026-05-02") for u in emitted), emitted  # the scope's clock, not the wall's
    run.usage_applied("marker-0")
    assert run.entry(PERSONA).usage.reinforce_count == 1
    assert run.entry(PERSONA).usage.reinforced_sources == ("recall",)
    day = T0 + timedelta(hours=22)  # 2026-05-02 10:00 UTC: the API's recall above fell on this day too
    records = [hit(PERSONA, day), hit(PERSONA, day), hit(PERSONA, day, "search"), hit(PERSONA, day + MIN)]
    produce(run.settings, "usage", records + records)  # every record delivered twice
    run.usage_applied("marker-1")
    assert run.entry(PERSONA).usage.reinforce_count == 2
    # more duplicates, then a crash before the worker can commit; the next worker re-reads them
    produce(run.settings, "usage", records)
    run.worker.kill()
    run.start()
    run.usage_applied("marker-2")
    persona = run.entry(PERSONA)
    assert persona.usage.reinforce_count == 2 and persona.usage.reinforced_sources == ("recall", "search")
    produce(run.settings, "usage", [hit(PERSONA, T0 + timedelta(days=1, hours=13))])  # the next UTC day
    run.wait_entry(PERSONA, lambda e: e.usage.reinforce_count == 3, "reinforced on the next day")
    journal = topic_values(run.settings.kafka_bootstrap, run.settings, "evidence")
    usage_events = {e["event_id"] for e in journal if e["entry_id"] == PERSONA and e["event"] == "usage"}
    assert len(usage_events) == 3


def test_the_sweep_soft_archives_and_the_api_and_cli_restore_it(run, monkeypatch):
    assert run.post(f"{ENTRIES}/{PERSONA}/restore", {"by": "ops"}).status_code == 409  # it is active
    produce(run.settings, "control", [{**scope_part(), "type": "tick", "now": iso(T0 + timedelta(days=120))}])
    gone = run.wait_entry(PERSONA, lambda e: e.status == "archived", "soft-archived")
    assert gone.usage.soft_archived_from == "active" and gone.archived_at.hour == 3
    assert run.post(f"{ENTRIES}/{PERSONA}/restore", {"by": "ops"}).status_code == 202
    back = run.wait_entry(PERSONA, lambda e: e.status == "active", "restored through the API")
    assert back.usage.reinforce_count == 3 and back.archived_at is None
    # never recalled again: the sweep takes it once more, and the CLI brings it back
    produce(run.settings, "control", [{**scope_part(), "type": "tick", "now": iso(T0 + timedelta(days=240))}])
    run.wait_entry(PERSONA, lambda e: e.status == "archived", "soft-archived again")
    for key, value in settings_env(run.settings, run.settings.kafka_bootstrap).items():
        monkeypatch.setenv(key, value)
    assert cli(["memory", "restore", PERSONA, "--by", "ops"]) == 0  # the scope is found in the journal
    run.wait_entry(PERSONA, lambda e: e.status == "active", "restored by the CLI")


def candidates(run) -> list[dict]:
    return topic_values(run.settings.kafka_bootstrap, run.settings, "fact-candidates")


def test_the_bridge_refuses_while_off_and_emits_one_candidate_per_nomination(run, monkeypatch, capsys):
    env = settings_env(run.settings, run.settings.kafka_bootstrap)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CREDENCE_BRIDGE", json.dumps({"bridge_enabled": False}))
    assert cli(["bridge", "nominate", PERSONA, "--by", "ana"]) == 2
    assert "retired" in capsys.readouterr().err
    assert candidates(run) == []
    monkeypatch.setenv("CREDENCE_BRIDGE", env["CREDENCE_BRIDGE"])  # the worker's: open, ripe after 1 day and 3 recalls
    assert cli(["bridge", "nominate", PERSONA, "--by", "ana", "--scope", SCOPE]) == 0
    (candidate,) = candidates(run)
    live = run.entry(PERSONA)
    assert candidate["candidate_id"] == f"{PERSONA}@{live.version}" and candidate["nominated_by"] == "ana"
    texts = [v["text"] for v in candidate["provenance"]["versions"]]
    assert texts[0] == "The user lives in Berlin." and texts[-1] == "The user lives in Paris."
    assert {s["event"] for s in candidate["provenance"]["signals"]} >= {"merged", "invalidated", "usage", "restored"}
    assert candidate["provenance"]["usage"]["reinforce_count"] == 3
    assert cli(["bridge", "nominate", PARIS, "--by", "ana"]) == 2  # a promoted reflection is not ripe
    assert "not ripe" in capsys.readouterr().err
    assert len(candidates(run)) == 1
    answer = run.post(f"{ENTRIES}/{PERSONA}/nominate", {"by": "bo"})
    assert answer.status_code == 202 and answer.json()["candidate_id"] == candidate["candidate_id"]
    assert run.post(f"{ENTRIES}/{PARIS}/nominate", {"by": "bo"}).status_code == 409
    assert [c["nominated_by"] for c in candidates(run)] == ["ana", "bo"]


def scope_clock(run) -> datetime | None:
    clock = run.worker.get(f"/scope/{SCOPE}")["clock"]
    return datetime.fromisoformat(clock) if clock else None


def tick_and_wait(run, at: datetime) -> None:
    produce(run.settings, "control", [{**scope_part(), "type": "tick", "now": iso(at)}])
    wait_until(lambda: (c := scope_clock(run)) is not None and c >= at, DEADLINE_S, f"the scope's clock at {at}")


def test_consensus_through_the_api_and_the_cli_is_journalled_and_exempts_from_the_sweep(run, monkeypatch, capsys):
    auth = {"Authorization": f"Bearer {run.key}"}

    def put(entry_id: str, body: dict) -> httpx.Response:
        return httpx.put(f"{run.worker.url}{ENTRIES}/{entry_id}/consensus", json=body, headers=auth, timeout=30)

    refused = put(PERSONA, {"score": 1.5, "by": "verifier"})
    assert refused.status_code == 422 and "score" in refused.json()["error"]
    assert put(PERSONA, {"score": 0.9}).status_code == 422  # who sets it must be said
    assert put("nope", {"score": 0.9, "by": "verifier"}).status_code == 404
    answer = put(PERSONA, {"score": 0.8, "by": "verifier"})
    assert answer.status_code == 202 and answer.json() == {"entry_id": PERSONA, "requested": "consensus",
                                                           "candidate_id": None}
    set_ = run.wait_entry(PERSONA, lambda e: e.consensus is not None, "corroborated")
    assert (set_.consensus.score, set_.consensus.by) == (0.8, "verifier")  # nothing refused was applied first
    detail = httpx.get(f"{run.worker.url}{ENTRIES}/{PERSONA}", headers=auth, timeout=30).json()
    last = detail["history"][-1]
    assert (last["event"], last["cause"], last["consensus"]["score"]) == ("consensus", "verifier", 0.8)
    # never recalled since its restore at day 240: by day 400 the sweep would have soft-archived it
    tick_and_wait(run, T0 + timedelta(days=400))
    assert run.entry(PERSONA).status == "active"
    for key, value in settings_env(run.settings, run.settings.kafka_bootstrap).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as refused_cli:
        cli(["memory", "consensus", PERSONA, "1.5", "--by", "ops"])
    assert refused_cli.value.code == 2 and "from 0 to 1" in capsys.readouterr().err
    assert cli(["memory", "consensus", PERSONA, "0.5", "--by", "ops"]) == 0  # the scope is found in the journal
    run.wait_entry(PERSONA, lambda e: e.consensus.score == 0.5 and e.consensus.by == "ops", "set by the CLI")
    tick_and_wait(run, T0 + timedelta(days=401))  # below 0.75 the sweep no longer skips it
    run.wait_entry(PERSONA, lambda e: e.status == "archived", "soft-archived")
    journal = topic_values(run.settings.kafka_bootstrap, run.settings, "evidence")
    assert [e["cause"] for e in journal if e["entry_id"] == PERSONA and e["event"] == "consensus"] == [
        "verifier", "ops"]
