"""The whole pipeline on a secured broker: worker, `credence replay`, `credence sink`, `credence forget` and
`credence archive` talk to ONLY the SASL_SSL listener (SCRAM) or ONLY the mutual-TLS listener, and end in
the same state as on PLAINTEXT. A wrong password, an untrusted CA and a PLAINTEXT client on a secured port
each end quickly with exit code 2 and one message naming the cause. No secret shows in any log line,
CLI output, /status or /metrics."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from credence.config import load_settings
from credence.streams.ops.broker import EmbeddedBroker, SecureListeners
from credence.streams.ops.worker_process import WorkerProcess, settings_env, wait_until
from tests.support.certs import make_pki
from tests.support.pipeline import (
    CLUSTER_LINES,
    collect,
    entry_digest,
    flush_and_wait_idle,
    fold_archive,
    fold_journal,
    pipeline_settings,
    scopes_of,
    valid_turn_counts,
    wait_turns,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.timeout(600)]

USER, PASSWORD = "credence-worker", "scram-Pa55-only-in-tests"
LINES = CLUSTER_LINES
SCOPES = scopes_of(LINES)
FORGOTTEN = ("acme", "alice")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(pki, tmp_path_factory):
    settings = load_settings()
    broker = EmbeddedBroker(tmp_path_factory.mktemp("secured") / "broker", settings.kafka_version,
                            settings.broker_cache_dir, heap="384m",
                            secure=SecureListeners(pki.ca_file, pki.broker_cert, pki.broker_key, ((USER, PASSWORD),)))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def scram(pki, **over) -> dict:
    return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": USER,
            "password": PASSWORD, "ca_file": str(pki.ca_file)} | over


def mtls(pki, **over) -> dict:
    return {"security_protocol": "SSL", "ca_file": str(pki.ca_file), "cert_file": str(pki.client_cert),
            "key_file": str(pki.client_key)} | over


def cli(settings, bootstrap: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "credence.streams.ops.cli", *args], env=settings_env(settings, bootstrap),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def whole_pipeline(bootstrap: str, root: Path, kafka: dict) -> dict:
    """Worker + replay CLI + flush; sink CLI; forget CLI; archive CLI. Returns what the run ended with."""
    settings = pipeline_settings(bootstrap, root, f"s{uuid.uuid4().hex[:10]}", kafka=kafka,
                                 archive={"root": str(root / "archive")})
    turns_file = root / "turns.jsonl"
    turns_file.write_bytes(b"\n".join(LINES) + b"\n")
    worker = WorkerProcess(settings, bootstrap, root / "worker.log")
    outputs = []
    try:
        worker.start(ready_timeout_s=120)
        done = cli(settings, bootstrap, "replay", str(turns_file), "--quiet")
        assert done.returncode == 0, done.stderr
        wait_turns(worker, valid_turn_counts(LINES))
        flush_and_wait_idle(worker, bootstrap, settings, SCOPES)
        before = collect(worker, bootstrap, settings, SCOPES, {})
        outputs += [done, cli(settings, bootstrap, "sink", "--drain")]
        outputs.append(cli(settings, bootstrap, "forget", *FORGOTTEN))
        forgotten = [s for s in SCOPES if s.startswith("/".join(FORGOTTEN) + "/")]
        wait_until(lambda: not set(forgotten) & set(worker.get("/scopes")["scopes"]), 90,
                   f"the worker to forget {FORGOTTEN} (log: {worker.log_path})")
        remaining = set(worker.get("/scopes")["scopes"])
        status_text = worker.get_text("/status") + worker.get_text("/metrics")  # no missing_ok: the secret check needs it
        outputs.append(cli(settings, bootstrap, "archive", "query", "--format", "csv",
                           "select tenant, user, count(*) from evidence group by all order by all"))
    finally:
        worker.stop()
    assert all(o.returncode == 0 for o in outputs), [o.stderr for o in outputs]
    logs = (root / "worker.log").read_text(errors="replace") + "".join(o.stdout + o.stderr for o in outputs)
    return {"entries": entry_digest(before.entries), "journal": entry_digest(fold_journal(before.journal)),
            "archived": entry_digest(fold_archive(before.archive)), "remaining": remaining, "forgotten": forgotten,
            "archive_rows": csv_counts(outputs[-1].stdout), "expected_rows": evidence_rows(before.journal),
            "text": logs + status_text}


def evidence_rows(journal: list[dict]) -> dict[tuple[str, str], int]:
    """Rows per (tenant, user) the evidence archive must hold after `forget`: one per distinct event."""
    events = {e["event_id"]: e for e in journal}.values()
    counts = Counter((e["tenant"], e["user"]) for e in events)
    return {key: n for key, n in counts.items() if key != FORGOTTEN}


def csv_counts(text: str) -> dict[tuple[str, str], int]:
    rows = [line.split(",") for line in text.strip().splitlines()[1:]]
    return {(tenant, user): int(n) for tenant, user, n in rows}


@pytest.mark.parametrize("variant", ["scram", "mtls"])
def test_the_whole_pipeline_on_a_secured_listener_matches_plaintext(variant, secured, pki, reference, tmp_path):
    """`reference` is the same input through the same pipeline on the suite's PLAINTEXT broker."""
    bootstrap, kafka = ((secured.sasl_bootstrap, scram(pki)) if variant == "scram"
                        else (secured.ssl_bootstrap, mtls(pki)))
    assert bootstrap != secured.bootstrap  # never the broker's internal PLAINTEXT listener
    run = whole_pipeline(bootstrap, tmp_path, kafka)
    assert run["entries"] and run["entries"] == entry_digest(reference.entries)
    assert run["journal"] == entry_digest(fold_journal(reference.journal))
    assert run["archived"] == entry_digest(fold_archive(reference.archive))
    assert len(run["forgotten"]) == 2 and run["remaining"] == set(SCOPES) - set(run["forgotten"])
    assert run["archive_rows"] == run["expected_rows"] and run["archive_rows"]
    assert PASSWORD not in run["text"] and "BEGIN PRIVATE KEY" not in run["text"]


def _bad_cases(secured, pki):
    return {
        "wrong password": (secured.sasl_bootstrap, scram(pki, password="not-the-password"),
                           "SASL authentication failed"),
        "untrusted CA": (secured.sasl_bootstrap, scram(pki, ca_file=str(pki.other_ca_file)),
                         "certificate is not trusted"),
        "plaintext on SASL_SSL": (secured.sasl_bootstrap, {}, "expects TLS"),
        "plaintext on mTLS": (secured.ssl_bootstrap, {}, "expects TLS"),
        "no client certificate": (secured.ssl_bootstrap, mtls(pki, cert_file=None, key_file=None),
                                  "requires a client certificate"),
    }


@pytest.mark.parametrize("case, command", [
    ("wrong password", ("worker",)),
    ("wrong password", ("sink",)),
    ("wrong password", ("forget", "acme", "ann")),
    ("wrong password", ("replay", "TURNS")),
    ("untrusted CA", ("replay", "TURNS")),
    ("plaintext on SASL_SSL", ("replay", "TURNS")),
    ("plaintext on mTLS", ("worker",)),
    ("no client certificate", ("replay", "TURNS")),
])
def test_a_bad_credential_ends_fast_with_one_clear_message(case, command, secured, pki, tmp_path):
    bootstrap, kafka, cause = _bad_cases(secured, pki)[case]
    settings = pipeline_settings(bootstrap, tmp_path, f"b{uuid.uuid4().hex[:8]}", kafka=kafka,
                                 archive={"root": str(tmp_path / "archive")})
    (tmp_path / "turns.jsonl").write_bytes(LINES[0] + b"\n")
    args = [str(tmp_path / "turns.jsonl") if a == "TURNS" else a for a in command]
    done = cli(settings, bootstrap, *args, timeout=30)  # never a hang, never an endless retry
    assert done.returncode == 2, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("credence: error: ") and cause in errors[0], done.stderr
    assert PASSWORD not in done.stdout + done.stderr and "not-the-password" not in done.stdout + done.stderr
