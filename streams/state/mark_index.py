"""Where a partition's duplicate marks are, by time: the prune index, kept in the `seen` table beside the
marks and written with them (one redo record per batch: all or nothing).

A partition's head (`marks␟partition`) names its time buckets (each `width` seconds of mark time) and, for
each, the range of its chunks and how many marks it holds; a chunk (`marks␟partition␟bucket␟n`) lists the
keys of marks one batch wrote into the bucket, at most `CHUNK_KEYS` of them. Pruning deletes the oldest
buckets whole once they are behind the horizon, reading their chunks. So a worker holds one small head per
partition it writes, never an entry per mark (held in Python heaps, ~124 B a mark, they reached gigabytes
at 100 turns/s over a 7-day horizon), and nothing is rebuilt from a scan of the table when a partition is
assigned: the head is read by the partition's first batch. A mark is kept until its whole bucket is behind
the horizon: up to one bucket (an hour at the default horizon) longer than the horizon itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

import orjson

from credence.streams.state import codec

KIND: Final = "marks"  # a `seen` key's first part: marks␟partition[␟bucket␟n]
CHUNK_KEYS = 500  # mark keys per chunk: ~420 kB at the longest ids, well below the record limit
PRUNE_CHUNKS = 64  # chunks read per partition and batch, at most: a backlog is pruned over the next batches
MIN_WIDTH_S = 3600.0
BUCKETS = 256  # a horizon's worth of buckets, at most (wider buckets for a longer horizon)
NO_TIME = float("-inf")


def head_key(partition: int) -> str:
    return f"{KIND}{codec.SEP}{partition}"


def chunk_key(partition: int, bucket: int, number: int) -> str:
    return f"{KIND}{codec.SEP}{partition}{codec.SEP}{bucket}{codec.SEP}{number}"


def is_index_key(key: str) -> bool:
    return key.startswith(KIND + codec.SEP)


def width_for(horizon_s: float) -> float:
    return max(MIN_WIDTH_S, horizon_s / BUCKETS)


@dataclass
class Head:
    """A partition's buckets: bucket -> [first chunk, next chunk, marks held]; `newest` the newest mark time
    (seconds) the partition has seen, which the horizon is counted back from."""

    width: float
    newest: float = NO_TIME
    buckets: dict[int, list[int]] = field(default_factory=dict)
    changed: bool = False

    def bucket_of(self, seconds: float) -> int:
        return math.floor(seconds / self.width)

    def behind(self, bucket: int, cutoff: float) -> bool:
        """Every time in `bucket` is before `cutoff`."""
        return (bucket + 1) * self.width <= cutoff

    def add(self, bucket: int, keys: int) -> int:
        """Count `keys` new marks in `bucket`; returns the number of the chunk that lists them."""
        first, number, held = self.buckets.get(bucket, (0, 0, 0))
        self.buckets[bucket] = [first, number + 1, held + keys]
        self.changed = True
        return number

    def dropped(self, bucket: int, marks: int = 1) -> None:
        if bucket in self.buckets:
            self.buckets[bucket][2] = max(0, self.buckets[bucket][2] - marks)
            self.changed = True

    def held(self) -> int:
        return sum(b[2] for b in self.buckets.values())

    def encode(self) -> bytes:
        newest = None if self.newest == NO_TIME else self.newest
        return orjson.dumps({"v": 1, "width": self.width, "newest": newest,
                             "buckets": {str(b): v for b, v in self.buckets.items()}})

    @classmethod
    def decode(cls, raw: bytes) -> Head:
        obj = orjson.loads(raw)
        newest = NO_TIME if obj["newest"] is None else float(obj["newest"])
        return cls(float(obj["width"]), newest, {int(b): list(v) for b, v in obj["buckets"].items()})
