"""De-duplication of at-least-once records: "first offset wins" per topic partition (parquet.py).

The identities seen below a span (schema.identity: an archival's entry_id@version, an evidence event_id,
both with the scope's incarnation when it has one) are kept
per partition as 128-bit BLAKE2b digests in two sorted numpy arrays: 16 bytes per identity, against
about 120 bytes for a Python set of "<uuid>@<version>" strings (measured: 1M event_ids = 121 MB as
a set of str, 16 MB here; a merge briefly needs ~40 bytes per identity). Two different identities
share a digest with probability ~n²/2^129 (n = 10^9: 1e-21); the decision stays deterministic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from credence.sinks.schema import IDENTITY, Row, identity
from credence.sinks.shards import Archive, list_shards, parse_shard_name, read_shard, shard_columns

_EMPTY = np.empty(0, dtype=np.uint64)


def digests(ids: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
    """The (high, low) 64-bit halves of each identity's 128-bit BLAKE2b digest."""
    raw = b"".join(hashlib.blake2b(i.encode(), digest_size=16).digest() for i in ids)
    pairs = np.frombuffer(raw, dtype="<u8").reshape(-1, 2)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


class IdentitySet:
    """A set of identities as digests, sorted by the high half (the low half checks a match)."""

    __slots__ = ("_hi", "_lo")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        self._hi, self._lo = _EMPTY, _EMPTY
        self.add_digests(*digests(ids))

    def __len__(self) -> int:
        return len(self._hi)

    @property
    def nbytes(self) -> int:
        return self._hi.nbytes + self._lo.nbytes

    def contains_digests(self, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
        left = np.searchsorted(self._hi, hi, side="left")
        right = np.searchsorted(self._hi, hi, side="right")
        found = np.zeros(len(hi), dtype=bool)
        one = right - left == 1
        found[one] = self._lo[left[one]] == lo[one]
        for j in np.flatnonzero(right - left > 1):  # equal high halves: ~never below 2^32 identities
            found[j] = bool((self._lo[left[j]:right[j]] == lo[j]).any())
        return found

    def contains(self, ids: list[str]) -> np.ndarray:
        return self.contains_digests(*digests(ids))

    def __contains__(self, identity: str) -> bool:
        return bool(self.contains([identity])[0])

    def add_digests(self, hi: np.ndarray, lo: np.ndarray) -> None:
        if not len(hi):
            return
        hi, lo = _unique(hi, lo)
        new = ~self.contains_digests(hi, lo)
        hi, lo = np.concatenate([self._hi, hi[new]]), np.concatenate([self._lo, lo[new]])
        order = np.argsort(hi, kind="stable")  # two sorted runs: a linear merge
        self._hi, self._lo = hi[order], lo[order]

    def update(self, ids: Iterable[str]) -> None:
        self.add_digests(*digests(ids))


def load_identities(archive: Archive, table: str, partition: int, below: int, since: int = 0,
                    into: IdentitySet | None = None) -> IdentitySet:
    """Add to ``into`` (or a new set) the identities of every shard of topic ``partition`` cut from
    an offset range that ends in [since, below): only the identity columns of each are read (those an
    older shard has: one written before the incarnation column reads it as 0)."""
    his, los = [], []
    for path in list_shards(archive, table):
        parsed = parse_shard_name(path.rsplit("/", 1)[1])
        if parsed is None or parsed[0] != partition or not since <= parsed[2] < below:
            continue
        columns = list(IDENTITY[table])
        if len(columns) > 1:  # the archive's: a shard may predate one of them
            columns = [c for c in columns if c in shard_columns(archive, path)]
        hi, lo = digests(identity(table, row) for row in read_shard(archive, path, columns).to_pylist())
        his.append(hi)
        los.append(lo)
    result = into if into is not None else IdentitySet()
    if his:
        result.add_digests(np.concatenate(his), np.concatenate(los))
    return result


def _unique(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((lo, hi))
    hi, lo = hi[order], lo[order]
    keep = np.ones(len(hi), dtype=bool)
    keep[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1])
    return hi[keep], lo[keep]


def decide_duplicates(rows: list[Row], table: str, seen: IdentitySet) -> tuple[set[str], set[int]]:
    """First offset wins: (identities kept, offsets of the rows dropped) for one span's rows, given
    the identities ``seen`` at lower offsets of the partition. A row's decision depends only on rows
    at lower offsets, so a prefix of the span gets the decisions the whole span gives it."""
    ordered = sorted(rows, key=lambda r: r.values["offset"])
    ids = [identity(table, r.values) for r in ordered]
    before = seen.contains(ids) if ids else np.zeros(0, dtype=bool)
    kept: set[str] = set()
    dropped: set[int] = set()
    for row, ident, known in zip(ordered, ids, before.tolist()):
        if known or ident in kept:
            dropped.add(row.values["offset"])
        else:
            kept.add(ident)
    return kept, dropped
