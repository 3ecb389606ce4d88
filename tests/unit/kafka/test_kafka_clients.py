"""Every Kafka client in the repository is built by the one option builder, and the builder turns the
security settings into the right aiokafka and Faust options without ever showing the password."""

from __future__ import annotations

import ast
import ssl
from pathlib import Path

import pytest

from credence.config import load_settings
from credence.config.kafka import KafkaSettings
from credence.errors import ConfigError
from credence.kafka import client_options, faust_options

ROOT = Path(__file__).resolve().parents[3]
CLIENTS = {"AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient", "AIOKafkaClient"}
BUILDERS = {"client_options", "faust_options"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def _is_client(call: ast.Call) -> bool:
    name = _name(call.func)
    return name.split(".")[-1] in CLIENTS or name == "faust.App"


def _built_by_builder(call: ast.Call) -> bool:
    return any(kw.arg is None and isinstance(kw.value, ast.Call) and _name(kw.value.func).split(".")[-1] in BUILDERS
               for kw in call.keywords)


def sources() -> list[Path]:
    skip = {".venv", ".git", "node_modules", "build"}
    return [p for p in ROOT.rglob("*.py") if not skip & set(p.relative_to(ROOT).parts)]


def client_calls() -> list[tuple[Path, ast.Call]]:
    out = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _is_client(node):
                out.append((path, node))
    return out


def test_every_kafka_client_is_built_by_the_option_builder():
    calls = client_calls()
    assert len(calls) >= 10, "the scan found too few clients: is it looking at the repository?"
    rogue = [f"{p.relative_to(ROOT)}:{c.lineno}" for p, c in calls if not _built_by_builder(c)]
    assert not rogue, f"Kafka clients built without credence.kafka.client_options: {rogue}"


def test_the_scan_recognises_a_client_built_by_hand():
    tree = ast.parse("p = AIOKafkaProducer(bootstrap_servers='x')\n"
                     "a = faust.App('id', broker='kafka://x')\n"
                     "ok = aiokafka.AIOKafkaConsumer('t', **client_options('x', kafka))\n")
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_client(n)]
    assert [_built_by_builder(c) for c in calls] == [False, False, True]


def test_plaintext_is_the_default():
    options = client_options("h:9092")
    assert options["security_protocol"] == "PLAINTEXT" and "ssl_context" not in options
    assert "sasl_plain_password" not in options


def test_sasl_ssl_scram_options(tmp_path):
    kafka = KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256", username="ann",
                          password="s3cret-pw", check_hostname=False)
    options = client_options("h:9093", kafka, acks="all")
    assert options["sasl_mechanism"] == "SCRAM-SHA-256" and options["sasl_plain_username"] == "ann"
    assert options["sasl_plain_password"] == "s3cret-pw" and options["acks"] == "all"
    assert isinstance(options["ssl_context"], ssl.SSLContext) and not options["ssl_context"].check_hostname


def test_faust_gets_credentials_objects():
    kafka = KafkaSettings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", username="ann",
                          password="pw")
    options = faust_options("a:1,b:2", kafka)
    assert options["broker"] == "kafka://a:1;kafka://b:2"
    credentials = options["broker_credentials"]
    assert credentials.protocol.value == "SASL_PLAINTEXT" and credentials.mechanism.value == "PLAIN"
    assert "pw" not in repr(credentials)
    assert "broker_credentials" not in faust_options("a:1")


def test_password_from_a_file_for_container_secrets(tmp_path, monkeypatch):
    secret = tmp_path / "kafka-password"
    secret.write_text("from-the-file\n")
    monkeypatch.setenv("CREDENCE_KAFKA__SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("CREDENCE_KAFKA__USERNAME", "worker")
    monkeypatch.setenv("CREDENCE_KAFKA__PASSWORD_FILE", str(secret))
    monkeypatch.setenv("CREDENCE_KAFKA_BOOTSTRAP", "k:9092")
    settings = load_settings()
    assert settings.kafka_bootstrap == "k:9092"  # the flat bootstrap variable keeps working
    assert client_options(settings.kafka_bootstrap, settings.kafka)["sasl_plain_password"] == "from-the-file"


def test_the_password_never_shows(monkeypatch):
    monkeypatch.setenv("CREDENCE_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("CREDENCE_KAFKA__USERNAME", "worker")
    monkeypatch.setenv("CREDENCE_KAFKA__PASSWORD", "hunter2-secret")
    settings = load_settings()
    for text in (repr(settings), str(settings), settings.model_dump_json(), repr(settings.kafka)):
        assert "hunter2-secret" not in text


@pytest.mark.parametrize("fields, words", [
    ({"security_protocol": "SASL_SSL"}, "needs a username"),
    ({"password": "a", "password_file": "/x"}, "not both"),
    ({"cert_file": "/c.pem"}, "both cert_file and key_file"),
    ({"security_protocol": "TLS"}, "security_protocol"),
    ({"sasl_mechanism": "GSSAPI"}, "sasl_mechanism"),
])
def test_inconsistent_security_settings_are_refused(fields, words):
    with pytest.raises(ConfigError, match=words):
        load_settings(kafka=fields)


def test_min_insync_above_replicas_is_refused():
    with pytest.raises(ConfigError, match="no acks=all write could ever succeed"):
        load_settings(topic_replicas=1, topic_min_insync_replicas=2)


def test_unreadable_tls_files_name_the_files(tmp_path):
    kafka = KafkaSettings(security_protocol="SSL", ca_file=tmp_path / "missing-ca.pem")
    with pytest.raises(ConfigError, match="missing-ca.pem"):
        client_options("h:1", kafka)


def test_a_missing_password_file_is_a_config_error(tmp_path):
    kafka = KafkaSettings(security_protocol="SASL_PLAINTEXT", username="u", password_file=tmp_path / "nope")
    with pytest.raises(ConfigError, match="cannot read the Kafka password file"):
        client_options("h:1", kafka)


@pytest.mark.parametrize("limit", [None, 2 * 1024 * 1024])
def test_fausts_producer_takes_every_record_within_credences_record_limit(limit):
    """Faust's own default (1,000,000 bytes) is below the record limit's default: a forwarded record
    between the two was refused by the producer and halted its partition on every restart."""
    kafka = KafkaSettings() if limit is None else KafkaSettings(max_record_bytes=limit)
    assert faust_options("a:1", kafka)["producer_max_request_size"] >= kafka.max_record_bytes + 1024
