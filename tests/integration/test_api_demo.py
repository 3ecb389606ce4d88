"""`credence demo --serve`: after the summary the worker keeps serving, with the sample's tenants and a
key and curl line that work as printed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import httpx
import pytest

from credence.streams.ops.broker import free_port
from tests.integration.test_demo import write_input

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_demo_serve_prints_a_working_key_and_curl_line(tmp_path, kafka_bootstrap):
    write_input(tmp_path / "turns.jsonl")
    env = dict(os.environ, CREDENCE_KAFKA_BOOTSTRAP=kafka_bootstrap, CREDENCE_DATA_DIR=str(tmp_path / "data"),
               CREDENCE_LLM__BACKEND="rules")
    proc = subprocess.Popen(
        [sys.executable, "-m", "credence.streams.ops.cli", "demo", "--input", str(tmp_path / "turns.jsonl"),
         "--timeout", "180", "--serve", "--port", str(free_port())],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    lines = []
    try:
        for line in proc.stdout:  # blocks until the demo prints; pytest-timeout bounds it
            lines.append(line.rstrip("\n"))
            if line.startswith("curl "):
                break
        output = "\n".join(lines)
        assert lines and lines[-1].startswith("curl "), output[-3000:]
        assert re.search(r"^processed \d+ turns \(3 rejected\)", output, re.M)
        url, key = re.search(r"^export CREDENCE_URL=(\S+) CREDENCE_KEY=(\S+)$", output, re.M).groups()
        path = re.search(r"\$CREDENCE_URL(\S+)", lines[-1])[1]
        assert re.fullmatch(r"/v1/tenants/acme/users/(alice|bob)/characters/(barista|tutor)/prompt", path)
        response = httpx.get(url + path, headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200 and response.json()["clock"], response.text
        assert httpx.get(url + path).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
