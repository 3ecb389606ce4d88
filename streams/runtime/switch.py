"""The hot-read powerful-memory switch: `powerful_memory_enabled` in the core config file, per tenant.

Read on each decision (re-parsed whenever the file changes), never cached across changes, no restart.
{"powerful_memory_enabled": true, "tenants": {"acme": {"powerful_memory_enabled": false}}}
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

FLAG = "powerful_memory_enabled"
MAX_BYTES = 1_000_000  # a switch file is a few lines; anything this big is not one


def check_switch(config: object) -> dict:
    """The file's shape, all of it, before any value is used: {flag: bool, tenants: {name: {flag: bool}}}.
    ValueError says what is wrong (the caller keeps the previous values)."""
    if not isinstance(config, dict):
        raise ValueError("the top level must be a JSON object")
    unknown = set(config) - {FLAG, "tenants"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)[:5]}; allowed: {FLAG!r}, 'tenants'")
    if FLAG in config and not isinstance(config[FLAG], bool):
        raise ValueError(f"{FLAG!r} must be true or false, got {config[FLAG]!r}"[:200])
    tenants = config.get("tenants", {})
    if not isinstance(tenants, dict):
        raise ValueError("'tenants' must be an object of tenant name -> {flag}")
    for name, value in tenants.items():
        if not isinstance(value, dict) or set(value) - {FLAG} or not isinstance(value.get(FLAG, True), bool):
            raise ValueError(f"tenant {name[:40]!r} must be {{{FLAG!r}: true|false}}, got {value!r}"[:200])
    return config


class PowerSwitch:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: tuple | None = None
        self._config: dict = {}

    def _load(self) -> dict:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._stamp, self._config = None, {}
            return self._config
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            try:
                if st.st_size > MAX_BYTES:
                    raise ValueError(f"{st.st_size} bytes is larger than {MAX_BYTES}")
                self._config = check_switch(json.loads(self.path.read_bytes()))
            except (OSError, ValueError, RecursionError) as exc:
                # Keep the last good switch: a half-written or broken file must not flip tenants' memory.
                log.error("ignoring invalid %s (%s); keeping the previous switch values", self.path, exc)
            self._stamp = stamp
        return self._config

    def enabled(self, tenant: str) -> bool:
        config = self._load()
        tenant_cfg = (config.get("tenants") or {}).get(tenant) or {}
        value = tenant_cfg.get("powerful_memory_enabled", config.get("powerful_memory_enabled", True))
        return bool(value) if isinstance(value, bool) else True
