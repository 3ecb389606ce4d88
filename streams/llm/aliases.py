"""Per-call short ids: the model sees T1/F1/O1, the code maps them back to the real ids.

An alias the call never handed out (a model ignoring its grammar, a server without constrained
decoding, an id injected through user text) is dropped and counted; the rest of the answer stands, so
one bad id never fails a call nor gets the identical request re-issued for ever."""

from __future__ import annotations

import logging
from collections.abc import Sequence

log = logging.getLogger(__name__)


class Aliases:
    def __init__(self, prefix: str, real_ids: Sequence[str]) -> None:
        unique = list(dict.fromkeys(real_ids))
        self.prefix = prefix
        self.names = [f"{prefix}{i}" for i in range(1, len(unique) + 1)]
        self._real = dict(zip(self.names, unique))
        self._alias = dict(zip(unique, self.names))

    def alias(self, real_id: str) -> str:
        return self._alias[real_id]

    def get(self, alias: str) -> str | None:
        return self._real.get(alias)


class Reader:
    """Maps a call's output back, dropping (and counting) what names an alias it never handed out."""

    def __init__(self, task: str) -> None:
        self.task = task
        self.dropped: list[str] = []

    def real(self, aliases: Aliases, alias: str) -> str | None:
        found = aliases.get(alias)
        if found is None:
            self.drop(alias, f"unknown {aliases.prefix} id")
        return found

    def drop(self, what: str, why: str) -> None:
        self.dropped.append(what)
        log.warning("LLM task %s: dropped %r from the output (%s)", self.task, what[:40], why)
