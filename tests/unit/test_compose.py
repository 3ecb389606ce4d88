"""docker-compose.yml describes the production-like stack: Kafka (KRaft), vLLM on a GPU, and a worker
wired to both. Parsed and checked against the compose file's rules here, everywhere (no Docker needed): what
`docker compose config` would refuse — unknown keys, a service with neither image nor build, a malformed
environment, port or interpolation, a depends_on or volume naming nothing — fails this module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


# The keys of the Compose specification this file may use (a typo is an unknown key to `docker compose`).
TOP_LEVEL = {"name", "services", "volumes", "networks", "secrets", "configs"}
SERVICE_KEYS = {"image", "build", "command", "entrypoint", "environment", "env_file", "ports", "volumes",
                "depends_on", "healthcheck", "restart", "deploy", "ipc", "secrets", "networks", "user",
                "working_dir", "container_name", "profiles", "labels", "expose", "shm_size", "ulimits"}
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
RESTART = {"no", "always", "on-failure", "unless-stopped"}
DEPENDS_ON_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
DURATION = re.compile(r"^(\d+(\.\d+)?(us|ms|s|m|h))+$")
# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+alt}, ${VAR+alt}; $$ escapes
INTERPOLATION = re.compile(r"\$\$|\$\{[A-Za-z_][A-Za-z0-9_]*(?:(?::?[-?+])[^}]*)?\}|\$[A-Za-z_][A-Za-z0-9_]*")
PORT = re.compile(r"^(?:(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):)?(?:\d{1,5}(?:-\d{1,5})?:)?\d{1,5}(?:-\d{1,5})?"
                  r"(?:/(?:tcp|udp))?$")


def interpolated(value: str) -> str:
    """`value` as compose reads it with no variable set: each interpolation replaced by its default (or
    nothing). A `$` that starts no valid interpolation is an error there, and here."""
    if "$" in INTERPOLATION.sub("", value):
        raise AssertionError(f"invalid interpolation in {value!r}")

    def default(match: re.Match) -> str:
        given = re.fullmatch(r"\$\{\w+:?-(.*)\}", match.group(0))
        return "$" if match.group(0) == "$$" else given.group(1) if given else ""

    return INTERPOLATION.sub(default, value)


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def compose_problems(doc: dict) -> list[str]:
    """What `docker compose config` would refuse in the file's structure; empty when it is well formed."""
    out = [f"unknown top-level key {k!r}" for k in doc if k not in TOP_LEVEL and not k.startswith("x-")]
    services, volumes = doc.get("services") or {}, doc.get("volumes") or {}
    if not services:
        out.append("no services")
    for text in strings(doc):
        try:
            interpolated(text)
        except AssertionError as exc:
            out.append(str(exc))
    for name, svc in services.items():
        out += [f"{name}: unknown key {k!r}" for k in svc if k not in SERVICE_KEYS and not k.startswith("x-")]
        if "image" not in svc and "build" not in svc:
            out.append(f"{name}: neither image nor build")
        env = svc.get("environment", {})
        if not isinstance(env, dict) or not all(isinstance(v, (str, int, float, bool)) or v is None
                                                for v in env.values()):
            out.append(f"{name}: environment must map names to scalars")
        elif bad := [k for k in env if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k))]:
            out.append(f"{name}: environment names {bad}")
        for port in svc.get("ports", []):
            if not PORT.match(interpolated(str(port))):
                out.append(f"{name}: port {port!r}")
        deps = svc.get("depends_on", {})
        for dep in deps:
            if dep not in services or dep == name:
                out.append(f"{name}: depends_on names {dep!r}, not another service")
            elif isinstance(deps, dict) and deps[dep].get("condition") not in DEPENDS_ON_CONDITIONS:
                out.append(f"{name}: depends_on {dep!r} condition {deps[dep].get('condition')!r}")
            elif isinstance(deps, dict) and deps[dep].get("condition") == "service_healthy" \
                    and "healthcheck" not in services[dep]:
                out.append(f"{name}: waits for {dep!r} to be healthy, which has no healthcheck")
        for mount in svc.get("volumes", []):
            source = str(mount).split(":")[0]
            if not source.startswith((".", "/", "~", "$")) and source not in volumes:
                out.append(f"{name}: volume {source!r} is not declared")
        check = svc.get("healthcheck", {})
        out += [f"{name}: healthcheck key {k!r}" for k in check if k not in HEALTHCHECK_KEYS]
        if check and (not isinstance(check.get("test"), list) or check["test"][0] not in ("CMD", "CMD-SHELL", "NONE")):
            out.append(f"{name}: healthcheck test must be a list starting with CMD, CMD-SHELL or NONE")
        out += [f"{name}: healthcheck {k} {check[k]!r}" for k in ("interval", "timeout", "start_period")
                if k in check and not DURATION.match(str(check[k]))]
        if "restart" in svc and svc["restart"] not in RESTART and not str(svc["restart"]).startswith("on-failure:"):
            out.append(f"{name}: restart {svc['restart']!r}")
        for key in ("command", "entrypoint"):
            if key in svc and not isinstance(svc[key], (str, list)):
                out.append(f"{name}: {key} must be a string or a list")
    return out


def test_the_file_is_well_formed_compose():
    assert compose_problems(yaml.safe_load(COMPOSE.read_text())) == []


@pytest.mark.parametrize("break_it, says", [
    (lambda d: d["services"]["worker"]["depends_on"].update(vlm={"condition": "service_healthy"}), "depends_on"),
    (lambda d: d["services"]["vllm"].pop("image"), "neither image nor build"),
    (lambda d: d["services"]["worker"].update(port=["6066:6066"]), "unknown key"),
    (lambda d: d["services"]["worker"].update(ports=["${CREDENCE_WEB_PUBLISH:-127.0.0.1:6066}:60x66"]), "port"),
    (lambda d: d["services"]["worker"]["environment"].update(CREDENCE_LLM__MODEL="${CREDENCE_LLM_MODEL:-x"),
     "interpolation"),
    (lambda d: d["services"]["worker"]["environment"].update(CREDENCE_SINKS=["archive"]), "scalars"),
    (lambda d: d["services"]["kafka"].pop("healthcheck"), "no healthcheck"),
    (lambda d: d["services"]["worker"]["volumes"].append("cache:/cache"), "not declared"),
    (lambda d: d["services"]["vllm"]["healthcheck"].update(interval="15 seconds"), "interval"),
])
def test_the_check_refuses_what_compose_refuses(break_it, says):
    doc = yaml.safe_load(COMPOSE.read_text())
    break_it(doc)
    assert any(says in problem for problem in compose_problems(doc)), compose_problems(doc)


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
