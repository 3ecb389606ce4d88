"""A scope's incarnation: which life of the scope its journal records belong to.

A forget read at offset o of a control partition makes every scope of its user created there afterwards
incarnation o + 1 (kept per partition and user in the `seen` table); every journal record carries it, so
a fold of the journal never mixes two lives of a scope. Details: docs/state.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

import orjson

from credence.streams.state import codec
from credence.streams.state.writes import TableWrites
from credence.tables.scope import user_prefix_of

KIND: Final = "incarnation"  # a `seen` key's first part: kind␟partition␟digest


def incarnation_key(partition: int, prefix: str) -> str:
    digest = hashlib.sha256(prefix.encode()).hexdigest()[:32]
    return f"{KIND}{codec.SEP}{partition}{codec.SEP}{digest}"


def is_incarnation_key(key: str) -> bool:
    return key.startswith(KIND + codec.SEP)


class Incarnations:
    def __init__(self, table, writes: TableWrites, partition_of: Callable[[str], int]) -> None:
        self._table, self._writes, self._partition_of = table, writes, partition_of

    def of(self, scope: str, prefix: str | None = None) -> int:
        """The incarnation a scope created now begins (a record of its partition is the current event);
        `prefix`: its user's key prefix, when the caller has it from the record."""
        prefix = prefix if prefix is not None else user_prefix_of(scope)
        raw = self._table.get(incarnation_key(self._partition_of(scope), prefix))
        return int(orjson.loads(raw)["incarnation"]) if raw is not None else 0

    def begin(self, prefix: str, partition: int, offset: int) -> None:
        """The forget of the user `prefix` read at `offset` of the control topic's `partition`: the user's
        scopes created there from now on are incarnation `offset + 1`."""
        value = orjson.dumps({"v": 1, "incarnation": offset + 1})
        self._writes.put(self._table, incarnation_key(partition, prefix), value, partition)
