"""The powerful-memory switch is read from its file on every decision, per tenant, default on."""

import json
import os

from credence.streams.runtime.switch import PowerSwitch


def write(path, obj, bump: int):
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + bump))  # a distinct mtime without sleeping


def test_missing_file_means_enabled(tmp_path):
    assert PowerSwitch(tmp_path / "core_config.json").enabled("acme") is True


def test_global_and_per_tenant_values_are_hot_read(tmp_path):
    path = tmp_path / "core_config.json"
    switch = PowerSwitch(path)
    write(path, {"powerful_memory_enabled": False}, 1)
    assert switch.enabled("acme") is False
    write(path, {"powerful_memory_enabled": True, "tenants": {"acme": {"powerful_memory_enabled": False}}}, 2)
    assert switch.enabled("acme") is False and switch.enabled("globex") is True
    path.unlink()
    assert switch.enabled("acme") is True


def test_a_broken_file_keeps_the_last_good_values(tmp_path):
    path = tmp_path / "core_config.json"
    switch = PowerSwitch(path)
    write(path, {"powerful_memory_enabled": False}, 1)
    assert switch.enabled("acme") is False
    write(path, "{not json", 2)
    assert switch.enabled("acme") is False  # a half-written file must not flip every tenant back on
    write(path, ["a", "list"], 3)
    assert switch.enabled("acme") is False


def test_non_boolean_values_fall_back_to_the_default(tmp_path):
    path = tmp_path / "core_config.json"
    write(path, {"powerful_memory_enabled": "no"}, 1)
    assert PowerSwitch(path).enabled("acme") is True
