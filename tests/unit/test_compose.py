"""docker-compose.yml describes the production-like stack: Kafka (KRaft), vLLM on a GPU, and a worker
wired to both. Parsed always; validated by `docker compose config` where Docker's compose plugin exists."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def has_compose_plugin() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not has_compose_plugin(), reason="docker with the compose plugin is not installed")
def test_docker_compose_accepts_the_file():
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "-q"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_three_services(services):
    assert set(services) == {"kafka", "vllm", "worker"}


def test_kafka_is_a_single_kraft_node_with_a_healthcheck(services):
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:4.")
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert "9092" in " ".join(kafka["healthcheck"]["test"])


def test_vllm_serves_the_configured_model_on_a_gpu(services):
    vllm = services["vllm"]
    assert vllm["image"].startswith("vllm/vllm-openai:")
    args = " ".join(vllm["command"])
    assert "--model=${CREDENCE_LLM_MODEL:-Qwen/Qwen2.5-7B-Instruct}" in args
    assert "--served-model-name=${CREDENCE_LLM_MODEL:-Qwen/Qwen2.5-7B-Instruct}" in args
    devices = vllm["deploy"]["resources"]["reservations"]["devices"]
    assert any("gpu" in d["capabilities"] for d in devices)
    assert "/health" in " ".join(vllm["healthcheck"]["test"])


def test_vllm_serves_what_the_prompts_rely_on(services):
    """Prefix caching for the static prompts, xgrammar for the id enums and bounds, neutral sampling."""
    args = services["vllm"]["command"]
    for flag in ("--enable-prefix-caching", "--structured-outputs-config.backend=xgrammar", "--generation-config=vllm"):
        assert flag in args


def test_the_worker_is_wired_to_kafka_and_vllm(services):
    worker = services["worker"]
    assert worker["build"] == "." and (ROOT / "Dockerfile").exists()
    assert worker["command"] == ["worker"]
    env = worker["environment"]
    assert env["CREDENCE_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert env["CREDENCE_LLM__BACKEND"] == "openai"
    assert env["CREDENCE_LLM__BASE_URL"] == "http://vllm:8000/v1"
    assert env["CREDENCE_LLM__MODEL"] == "${CREDENCE_LLM_MODEL:-Qwen/Qwen2.5-7B-Instruct}"
    assert worker["depends_on"] == {"kafka": {"condition": "service_healthy"},
                                    "vllm": {"condition": "service_healthy"}}


def test_the_worker_environment_is_valid_credence_settings(services, monkeypatch):
    from credence.config import load_settings

    for name, value in services["worker"]["environment"].items():
        monkeypatch.setenv(name, re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(value)))  # compose's defaults
    settings = load_settings()
    assert settings.kafka_bootstrap == "kafka:9092"
    assert settings.llm.backend == "openai" and settings.llm.model == "Qwen/Qwen2.5-7B-Instruct"


def test_the_image_installs_every_package_folder():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for folder in ("credence", "config", "tables", "streams", "sinks"):
        assert f"COPY {folder} {folder}" in dockerfile
