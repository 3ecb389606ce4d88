"""A scope's incarnation: which life of the scope its journal records belong to.

The journal (credence.evidence, credence.archive) keeps a forgotten user's records, and entry ids are
deterministic: a user who returns after a forget says the same things and gets entries under the same ids,
whose version lines start again at 1. So every journal record carries the incarnation of its scope, and
every fold of the journal keeps only the records of one incarnation (the scope's current one).

The incarnation is the forget's own position: a forget read at offset o of the control topic's partition p
makes every scope of its user created on p afterwards incarnation o + 1 (0 is a scope whose user was never
forgotten there). It depends only on the order of records on the scope's partition, so a replay of the
topics ends in the same state, and a forget applied twice (redelivered) sets the same value. `credence
forget` knows the offsets its forget records were written at, so the archive's forget marker can name the
same numbers as its cut-off (sinks/forget.py): rows of incarnations below it are the forgotten user's.

Kept per partition and user in the `seen` table under `incarnation␟partition␟<digest of tenant/user/>` (the
key does not name the user), written with the forget's deletions (one redo record: all or nothing) on every
partition the forget reaches, whether the user had scopes there or not (a returning user may start a new
character on any partition). Never deleted: one small key per forgotten user per partition. A scope reads it
once, when it is created; the value lives on in the scope's state (ScopeState.incarnation).

Separate from the forget filters (forgets.py), which are pruned once passed: an incarnation must outlive them.
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

    def of(self, scope: str) -> int:
        """The incarnation a scope created now begins (a record of its partition is the current event)."""
        raw = self._table.get(incarnation_key(self._partition_of(scope), user_prefix_of(scope)))
        return int(orjson.loads(raw)["incarnation"]) if raw is not None else 0

    def begin(self, prefix: str, partition: int, offset: int) -> None:
        """The forget of the user `prefix` read at `offset` of the control topic's `partition`: the user's
        scopes created there from now on are incarnation `offset + 1`."""
        value = orjson.dumps({"v": 1, "incarnation": offset + 1})
        self._writes.put(self._table, incarnation_key(partition, prefix), value, partition)
