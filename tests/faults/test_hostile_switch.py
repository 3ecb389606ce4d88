"""Hostile switch files: a broken, half-written, binary, wrongly typed or huge core config never flips a
tenant's memory and never raises into the worker: the last good values stay, the reason is logged."""

from __future__ import annotations

import json
import logging
import os

import pytest

from credence.streams.runtime.switch import PowerSwitch

GOOD = {"powerful_memory_enabled": True, "tenants": {"acme": {"powerful_memory_enabled": False}}}
HOSTILE = {
    "truncated": b'{"powerful_memory_enabled": fal',
    "not_utf8": b'{"powerful_memory_enabled": \xff\xfe}',
    "nul": b'\x00\x00\x00',
    "empty": b"",
    "list_top": b"[true]",
    "string_top": b'"off"',
    "tenants_list": json.dumps({"tenants": ["acme"]}).encode(),
    "tenants_string": json.dumps({"tenants": "acme"}).encode(),
    "tenant_value_list": json.dumps({"tenants": {"acme": [False]}}).encode(),
    "tenant_value_string": json.dumps({"tenants": {"acme": "off"}}).encode(),
    "flag_string": json.dumps({"powerful_memory_enabled": "false"}).encode(),
    "flag_number": json.dumps({"powerful_memory_enabled": 0}).encode(),
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "huge": b'{"x": "' + b"a" * 5_000_000 + b'"}',
}


def write(path, data: bytes) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(os.stat(path).st_mtime_ns + 1_000_000, os.stat(path).st_mtime_ns + 1_000_000))


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_switch_file_keeps_the_last_good_values(kind, tmp_path, caplog):
    path = tmp_path / "core_config.json"
    write(path, json.dumps(GOOD).encode())
    switch = PowerSwitch(path)
    assert (switch.enabled("acme"), switch.enabled("globex")) == (False, True)
    write(path, HOSTILE[kind])
    with caplog.at_level(logging.ERROR):
        state = (switch.enabled("acme"), switch.enabled("globex"))
    assert state == (False, True), kind
    assert any("keeping the previous switch values" in r.getMessage() for r in caplog.records), kind
