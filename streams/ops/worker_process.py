"""A worker as a child process: what the demo and the integration tests run, and what they kill."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import SecretStr

from credence.config import Settings
from credence.errors import CredenceError
from credence.streams.ops.broker import die_with_parent


def wait_until(condition: Callable[[], object], deadline_s: float, what: str, poll_s: float = 0.2):
    """Poll `condition` until it returns a truthy value; raise with `what` at the deadline."""
    end = time.monotonic() + deadline_s
    last_error: Exception | None = None
    while time.monotonic() < end:
        try:
            value = condition()
            if value:
                return value
        except CredenceError:
            raise  # the condition knows it can never become true (e.g. the worker died)
        except Exception as exc:  # noqa: BLE001 - any other error is just "not yet"
            last_error = exc
        time.sleep(poll_s)
    raise CredenceError(f"timed out after {deadline_s:.0f}s waiting for {what}"
                        + (f" (last error: {last_error})" if last_error else ""))


def settings_env(settings: Settings, bootstrap: str) -> dict[str, str]:
    """The environment that makes a child worker load exactly `settings` (every field; nested sections
    travel whole as JSON, which pydantic-settings reads for complex values)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CREDENCE_")}
    for name, value in settings.model_dump(mode="json").items():
        if name == "llm" and settings.llm.api_key is not None:
            value["api_key"] = settings.llm.api_key.get_secret_value()
        if name == "kafka" and settings.kafka.password is not None:
            value["password"] = settings.kafka.password.get_secret_value()
        if name == "api" and settings.api.operator_key is not None:
            value["operator_key"] = settings.api.operator_key.get_secret_value()
        env[f"CREDENCE_{name.upper()}"] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    env["CREDENCE_KAFKA_BOOTSTRAP"] = bootstrap
    return env


class WorkerProcess:
    """`credence worker` in a child process, with its web port as the way to ask it questions."""

    def __init__(self, settings: Settings, bootstrap: str, log_path: Path, extra_env: dict | None = None):
        if settings.api.operator_key is None:
            # Its parent reads every tenant's scope views (/scopes, /scope/…): with a key of its own.
            key = SecretStr(secrets.token_urlsafe(32))
            settings = settings.model_copy(update={"api": settings.api.model_copy(update={"operator_key": key})})
        self.settings = settings
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.env = settings_env(settings, bootstrap) | (extra_env or {})
        self.proc: subprocess.Popen | None = None
        # One client for every question: a new one per call builds a TLS context (~25 ms of CPU), which
        # a benchmark polling /status every 0.1 s took from the worker it measures.
        self._http: httpx.Client | None = None

    @property
    def operator_headers(self) -> dict[str, str]:
        """What reads every tenant's scope views and /status's scope names on this worker."""
        return {"Authorization": f"Bearer {self.settings.api.operator_key.get_secret_value()}"}

    @property
    def url(self) -> str:
        return f"http://{self.settings.web_host}:{self.settings.web_port}"

    def start(self, ready_timeout_s: float = 60.0) -> WorkerProcess:
        self.launch()
        wait_until(lambda: self._alive() and self.get("/status").get("ready"), ready_timeout_s,
                   f"the worker to be ready (log: {self.log_path})")
        return self

    def launch(self) -> WorkerProcess:
        """Start the process and return at once (`start` also waits until it is ready). Call it from a
        thread that outlives the worker: the child is told to die with the thread that started it."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "credence.streams.ops.cli", "worker"],
            env=self.env, stdout=open(self.log_path, "ab"), stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        return self

    def _request(self, path: str) -> httpx.Response:
        try:
            if self._http is None:
                self._http = httpx.Client(timeout=5.0)
            return self._http.get(self.url + path, headers=self.operator_headers)
        except httpx.TransportError:
            self._alive()  # a dead worker is an answer (CredenceError), not a reason to keep waiting
            raise

    def _alive(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise CredenceError(f"the worker exited (code {self.proc and self.proc.returncode}); "
                                f"see {self.log_path}")
        return True

    def get(self, path: str) -> dict:
        response = self._request(path)
        response.raise_for_status()
        return response.json()

    def get_text(self, path: str, missing_ok: bool = False) -> str:
        response = self._request(path)
        if missing_ok and response.status_code == 404:
            return ""
        response.raise_for_status()
        return response.text

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no final commit — the crash the recovery tests need."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._close_http()

    def _close_http(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._close_http()
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
