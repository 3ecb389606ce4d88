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
                config = json.loads(self.path.read_text())
                if not isinstance(config, dict):
                    raise ValueError("the top level must be a JSON object")
                self._config = config
            except (OSError, ValueError) as exc:
                # Keep the last good switch: a half-written or broken file must not flip tenants' memory.
                log.error("ignoring invalid %s (%s); keeping the previous switch values", self.path, exc)
            self._stamp = stamp
        return self._config

    def enabled(self, tenant: str) -> bool:
        config = self._load()
        tenant_cfg = (config.get("tenants") or {}).get(tenant) or {}
        value = tenant_cfg.get("powerful_memory_enabled", config.get("powerful_memory_enabled", True))
        return bool(value) if isinstance(value, bool) else True
