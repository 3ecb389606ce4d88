"""Typed settings. Nothing here is read at import time: call ``load_settings()`` at start."""

from credence.config.settings import Settings, load_settings

__all__ = ["Settings", "load_settings"]
