"""`credence mcp` is quiet by default (a stdio MCP client shows the proxy's stderr to its user); every
command takes a level before it, and `mcp` after it too."""

from __future__ import annotations

import pytest

from credence.streams.ops.cli import build_parser, log_level

MCP = ["mcp", "--url", "http://127.0.0.1:6066", "--key-file", "acme.key"]


@pytest.mark.parametrize(("argv", "level"), [
    (MCP, "WARNING"),
    (MCP + ["--log-level", "INFO"], "INFO"),
    (["--log-level", "DEBUG", *MCP], "DEBUG"),
    (["--log-level", "DEBUG", *MCP, "--log-level", "ERROR"], "ERROR"),
    (["worker"], "INFO"),
    (["--log-level", "WARNING", "worker"], "WARNING"),
])
def test_the_level_asked_for_else_the_commands_default(argv, level):
    assert log_level(build_parser().parse_args(argv)) == level


def test_a_failed_command_ends_with_its_one_line_even_when_a_future_is_abandoned(tmp_path):
    # A Kafka client aborted by a TLS failure leaves connection futures with unretrieved errors; asyncio
    # logs each as "Future exception was never retrieved" (a traceback) when it is collected at exit.
    import subprocess
    import sys

    script = tmp_path / "abandon.py"
    script.write_text(
        "import asyncio, sys\n"
        "from credence.errors import CredenceError\n"
        "from credence.streams.ops import cli\n"
        "kept = []\n"
        "def abandon(args):\n"
        "    loop = asyncio.new_event_loop()\n"
        "    future = loop.create_future()\n"
        "    future.set_exception(OSError('bad certificate'))\n"
        "    kept.append((loop, future))\n"
        "    raise CredenceError('the broker closed the TLS connection')\n"
        "cli.cmd_worker = abandon\n"
        "sys.exit(cli.main(['worker']))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2
    assert lines == ["credence: error: the broker closed the TLS connection"], done.stderr
