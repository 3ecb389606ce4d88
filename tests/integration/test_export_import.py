"""`credence import` and `credence export` against one real worker: an N.E.K.O. fixture installation
imported through the log is served over /v1 with the origin's scores at a fixed instant; --dry-run sends
nothing; the same import again changes nothing; exporting the imported tenant gives back the file the
import read, byte for byte after the header; a bad line leaves its scope out and is dead-lettered."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from credence.streams.ops.neko import from_neko
from credence.streams.ops.portable import parse
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from credence.tables.entries import Entry
from tests.support.api import add_tenant, client
from tests.support.cli import in_process
from tests.support.pipeline import DEADLINE_S, discard, pipeline_settings, topic_values
from tests.support.turns import end_offsets

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "neko" / "modern"
AT = "2026-09-01T00:00:00Z"
NOW = datetime(2026, 9, 1, tzinfo=UTC)
NEKO = ["--from-neko", str(FIXTURE), "--tenant", "acme", "--user", "kim", "--timezone", "Asia/Shanghai", "--at", AT]


@pytest.fixture(scope="module")
def served(kafka_bootstrap, tmp_path_factory):
    root = tmp_path_factory.mktemp("porting")
    settings = pipeline_settings(kafka_bootstrap, root, f"port{uuid.uuid4().hex[:8]}")
    key = add_tenant(kafka_bootstrap, settings, "acme")
    worker = WorkerProcess(settings, kafka_bootstrap, root / "worker.log").start()
    try:
        yield worker, settings, key
    finally:
        discard(worker)


@pytest.fixture
def cli(served, kafka_bootstrap, monkeypatch, capsys, caplog):
    _, settings, _ = served
    env = {k: v for k, v in settings_env(settings, kafka_bootstrap).items() if k.startswith("CREDENCE_")}
    run = in_process(monkeypatch, capsys, caplog)
    return lambda *args: run(*args, env=env)


def listing(served, user: str, character: str) -> dict[str, object]:
    worker, _, key = served
    with client(worker, key, "acme") as api:
        return {e.id: e for e in api.entries(user, character, at=NOW).entries}


def test_import_from_neko_serves_the_origins_scores(served, cli, kafka_bootstrap, tmp_path):
    _, settings, _ = served
    before = asyncio.run(end_offsets(kafka_bootstrap, settings.topic("control"), settings.topic_partitions))
    dry = cli("import", *NEKO, "--dry-run")
    assert dry.returncode == 0 and "dry run: nothing was sent" in dry.stdout
    assert "acme/kim/小天: 15 entries" in dry.stdout and "skipped character folder '旧角色'" in dry.stdout
    assert asyncio.run(end_offsets(kafka_bootstrap, settings.topic("control"), settings.topic_partitions)) == before

    mapped = tmp_path / "mapped.jsonl"
    done = cli("import", *NEKO, "--out", str(mapped), "--by", "ops")
    assert done.returncode == 0 and "sent 17 entries of 3 scopes" in done.stdout, done.stdout + done.stderr
    lines, _ = from_neko(FIXTURE, "acme", "kim", "Asia/Shanghai", NOW)
    expected = {e["id"]: Entry.from_dict(e) for e in parse(lines).scopes["acme/kim/小天"]}
    live = {i: e for i, e in expected.items() if e.status != "archived"}
    got = wait_until(lambda: (v := listing(served, "kim", "小天")) and set(live) <= set(v) and v, DEADLINE_S,
                     "the imported entries to be served")
    for eid, entry in live.items():
        assert math.isclose(got[eid].score, entry.score(NOW), abs_tol=1e-9), eid
        assert Entry.from_dict(got[eid].snapshot) == entry  # counters, clocks and version as they came
    assert not set(got) & {i for i, e in expected.items() if e.status == "archived"}
    wait_until(lambda: sum(e.protected for e in listing(served, "kim", "小天").values()) == 6, DEADLINE_S,
               "the character card (six protected entries)")
    assert "ref_restored00000001" in listing(served, "group_participant:qq:100:200", "小天")


def test_export_gives_back_what_was_imported_and_a_second_import_is_a_no_op(served, cli, kafka_bootstrap, tmp_path):
    _, settings, _ = served
    mapped = tmp_path / "mapped.jsonl"
    cli("import", *NEKO, "--out", str(mapped), "--dry-run")
    out = tmp_path / "export.jsonl"

    def exported() -> bool:
        assert cli("export", "acme", "--out", str(out), "--at", AT).returncode == 0
        return out.read_text().splitlines()[1:] == mapped.read_text().splitlines()[1:]

    wait_until(exported, DEADLINE_S, "the export to hold every imported entry")
    one = tmp_path / "one.jsonl"
    assert cli("export", "acme/kim/小天", "--out", str(one), "--at", AT).returncode == 0  # its partition only
    assert one.read_text().splitlines()[1:] == [x for x in mapped.read_text().splitlines()[1:]
                                                if '"scope":"acme/group_participant' not in x]
    again = cli("import", str(out), "--by", "ops")  # the same entries: the same import ids
    assert again.returncode == 0
    marker = tmp_path / "marker.jsonl"
    snap = json.loads(out.read_text().splitlines()[-1])
    snap["entry"] |= {"id": "marker", "text": "A later import on the same partition."}
    marker.write_text(out.read_text().splitlines()[0] + "\n" + json.dumps(snap) + "\n")
    assert cli("import", str(marker), "--by", "ops").returncode == 0
    scope = snap["scope"].split("/")
    wait_until(lambda: "marker" in listing(served, scope[1], scope[2]) or snap["entry"]["status"] == "archived",
               DEADLINE_S, "the marker import applied (after the repeated one, in the partition's order)")
    imported = [e["entry_id"] for e in topic_values(kafka_bootstrap, settings, "evidence") if e["event"] == "imported"]
    assert sorted(imported) == sorted([*{json.loads(x)["entry"]["id"] for x in mapped.read_text().splitlines()
                                         if '"type":"entry"' in x}, "marker"])  # each once: the repeat changed nothing


def test_a_bad_line_is_dead_lettered_and_its_scope_left_out(served, cli, kafka_bootstrap, tmp_path):
    _, settings, _ = served
    good = {"id": "r1", "kind": "reflection", "tenant": "acme", "user": "dora", "character": "aria",
            "text": "The user paints.", "status": "pending", "created_at": "2026-08-01T00:00:00+00:00"}
    bad = good | {"user": "eve", "status": "merged"}
    head = {"type": "header", "format": "credence-export", "format_version": 1, "selection": "acme"}
    # A big scope (~1.3 MB of entries, over the record limit) travels as several import records.
    big = [{"type": "entry", "scope": "acme/big/aria", "entry": good | {"user": "big", "id": f"b{i}",
                                                                       "text": f"Fact {i}: " + "x" * 2000}}
           for i in range(600)]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in (
        head, {"type": "entry", "scope": "acme/dora/aria", "entry": good},
        {"type": "entry", "scope": "acme/eve/aria", "entry": bad},
        {"type": "entry", "scope": "acme/eve/aria", "entry": bad | {"id": "r2", "status": "pending"}}, *big)) + "\n")
    dry = cli("import", str(path), "--dry-run")
    assert dry.returncode == 1 and "acme/eve/aria: 1 entries" in dry.stdout and "NOT imported" in dry.stdout
    done = cli("import", str(path), "--by", "ops")
    assert done.returncode == 1 and "1 dead letters" in done.stdout
    wait_until(lambda: "r1" in listing(served, "dora", "aria"), DEADLINE_S, "the good scope imported")
    wait_until(lambda: len(listing(served, "big", "aria")) == 600, DEADLINE_S, "the big scope imported whole")
    (letter,) = [d for d in topic_values(kafka_bootstrap, settings, "dlq") if d["topic"].startswith("import:")]
    assert letter["offset"] == 3 and "status must be one of" in letter["reason"]
    assert listing(served, "eve", "aria") == {}  # neither of eve's lines: never half a scope
