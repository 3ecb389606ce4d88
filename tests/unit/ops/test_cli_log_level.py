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
