"""The hostile corpus through the topics, interleaved with good conversations: turns via `credence replay
FILE` (and the same file via `credence demo --input`), feedback and control produced directly. Every bad
record reaches credence.dlq once with its reason; no command prints a traceback; the good scopes end
exactly as a clean run of the good records alone; odd-but-valid and prompt-injection turns live in
scopes of their own and change nothing else."""

from __future__ import annotations

import asyncio
import base64
import os
import random
import re
import subprocess
import sys
from collections import Counter

import pytest
from aiokafka import AIOKafkaProducer

from credence.kafka import client_options
from credence.records.dead_letter import MAX_ORIGINAL_BYTES
from credence.streams.ops.admin import ensure_topics
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from tests.faults.conversations import conversations
from tests.faults.harness import deadline_for, fresh_settings, reference_run, wait_turns_or_explain
from tests.faults.hostile import _enc, isolated_turns, topic_corpus
from tests.support.pipeline import (
    FAST_GROUP_ENV,
    collect,
    entry_diff,
    entry_digest,
    flush_and_wait_idle,
    line_scope,
    scopes_of,
    topic_values,
    valid_turn_counts,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

OVERSIZE = _enc({"v": 1, "tenant": "acme", "user": "alice", "character": "barista", "turn_id": "huge",
                 "role": "user", "text": "y" * 2_000_000, "ts": "2026-09-01T09:00:00Z"})


def build(seed: int = 5):
    good = conversations(240, 6, seed)
    isolated = [_enc(t) for t in isolated_turns()]
    bad = topic_corpus(seed)
    bad_turns = [b for b in bad if b.topic == "turns" and b.value is not None and b"\n" not in b.value
                 and b"\r" not in b.value]
    rng = random.Random(seed)
    lines = list(good)
    for line in isolated + [b.value for b in bad_turns] + [OVERSIZE]:
        lines.insert(rng.randrange(len(lines) + 1), line)
    others = [b for b in bad if b.topic != "turns"] + [b for b in bad if b.topic == "turns" and b.value is None]
    return good, isolated, bad_turns, others, lines


async def produce_raw(bootstrap, settings, bad) -> None:
    await ensure_topics(bootstrap, settings)
    producer = AIOKafkaProducer(**client_options(bootstrap, settings.kafka, acks="all", max_request_size=2_000_000))
    await producer.start()
    try:
        keys = [b"acme/alice/barista", None, b"nonsense", "\u202e/../x".encode()]
        for i, b in enumerate(bad):
            key = keys[i % len(keys)]
            if b.value is None and key is None:  # a tombstone needs a key (the corpus's order moves with its size)
                key = b"nonsense"
            await producer.send_and_wait(settings.topic(b.topic), b.value, key=key)
    finally:
        await producer.stop()


def cli(args, settings, bootstrap, tmp_path, timeout=400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", *args], cwd=tmp_path,
                          env=settings_env(settings, bootstrap), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_hostile_records_on_every_topic_are_dead_lettered_and_good_ones_unharmed(kafka_bootstrap, tmp_path):
    good, isolated, bad_turns, others, lines = build()
    assert len(bad_turns) + len(others) >= 300
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    deadline = deadline_for(len(good) * 3)
    ref = reference_run(kafka_bootstrap, tmp_path / "clean", good, deadline)

    settings = fresh_settings(kafka_bootstrap, tmp_path / "hostile")
    worker = WorkerProcess(settings, kafka_bootstrap, tmp_path / "worker.log", extra_env=FAST_GROUP_ENV)
    expected = valid_turn_counts(good + isolated)
    try:
        worker.start(ready_timeout_s=300)
        result = cli(["replay", str(path), "--quiet"], settings, kafka_bootstrap, tmp_path)
        assert "Traceback" not in result.stdout + result.stderr, result.stderr[-3000:]
        assert result.returncode == 0 and "too large for Kafka" in result.stderr, result.stderr[-2000:]
        asyncio.run(produce_raw(kafka_bootstrap, settings, others))
        wait_turns_or_explain(worker, expected, deadline)
        want = len(bad_turns) + len(others) + 1
        try:
            wait_until(lambda: len(topic_values(kafka_bootstrap, settings, "dlq")) >= want, deadline,
                       f"{want} dead letters")
        except Exception:
            got = {base64.b64decode(d["original"]) for d in topic_values(kafka_bootstrap, settings, "dlq")}
            print("not dead-lettered:", [(b.topic, b.kind) for b in bad_turns + others
                                         if (b.value or b"")[:MAX_ORIGINAL_BYTES] not in got])
            raise
        scopes = scopes_of(good)
        status = flush_and_wait_idle(worker, kafka_bootstrap, settings, scopes_of(good + isolated), deadline)
        run = collect(worker, kafka_bootstrap, settings, scopes, status)
        every_scope = set(worker.get("/scopes")["scopes"])
    finally:
        worker.stop()

    letters = topic_values(kafka_bootstrap, settings, "dlq")
    by_original = Counter(base64.b64decode(d["original"]) for d in letters)
    reasons = {base64.b64decode(d["original"]): d["reason"] for d in letters}
    for b in bad_turns + others:
        value = (b.value or b"")[:MAX_ORIGINAL_BYTES]  # a huge original is kept truncated, and says so
        assert by_original[value] >= 1, f"{b.topic}/{b.kind} was not dead-lettered"
        assert re.search(b.reason, reasons[value]), (b.topic, b.kind, reasons[value])
    assert len(letters) == want, "a record was dead-lettered twice, or a good one was"
    assert any("larger than" in d["reason"] for d in letters), "the oversize line was not dead-lettered"
    assert all(d.get("original_truncated") for d in letters if d.get("original_bytes")), "a cut original not marked"
    assert sum(1 for d in letters if d.get("original_truncated")) >= 2  # the 1 MB texts
    assert status["stats"]["turns_rejected"] == len(bad_turns) + sum(1 for b in others if b.topic == "turns")

    assert entry_digest(run.entries) == entry_digest(ref.entries), entry_diff(run.entries, ref.entries)
    assert {s: v["turns"] for s, v in run.views.items()} == {s: v["turns"] for s, v in ref.views.items()}
    assert {line_scope(t) for t in isolated} <= every_scope, "an odd-but-valid scope was not kept apart"


def test_demo_with_the_hostile_file_ends_with_its_summary(kafka_bootstrap, tmp_path):
    good, isolated, bad_turns, _, lines = build(seed=6)
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    env = dict(os.environ, CREDENCE_KAFKA_BOOTSTRAP=kafka_bootstrap, CREDENCE_DATA_DIR=str(tmp_path / "data"),
               CREDENCE_LLM__BACKEND="rules")
    result = subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", "demo", "--input", str(path),
                             "--timeout", "300"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600, stdin=subprocess.DEVNULL)
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output[-3000:]
    assert result.returncode == 0, output[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    match = re.match(r"^processed (\d+) turns \((\d+) rejected\) in", last)
    assert match, last
    assert (int(match[1]), int(match[2])) == (len(lines) - 1, len(bad_turns)), last
