"""Read-your-writes: the consistency token `POST …/turns` answers and `?wait=` reads check.

A token names, for each turns-topic partition the request wrote to, the offset of its last turn there:
"3:120,5:88". A scope lives on one partition, and offsets on a partition only grow, so a read waits until
the scope's owner (whichever worker holds the partition now: the applied offsets travel with the scope's
state) has applied that partition up to the token's offset. Nothing else is needed: no clock, no worker id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from credence.errors import ApiError
from credence.streams.scope.turn_status import WAITS

MAX_TOKEN = 4000  # characters: a partition and offset each for a few hundred partitions
_PART = re.compile(r"(\d{1,6}):(\d{1,19})")


def encode(positions: dict[int, int]) -> str:
    """The token for turns written at these (partition -> highest offset) positions."""
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


def decode(token: str) -> dict[int, int]:
    """partition -> offset; ApiError 400 naming what is wrong."""
    if len(token) > MAX_TOKEN:
        raise ApiError(400, f"token is longer than {MAX_TOKEN} characters")
    positions: dict[int, int] = {}
    for part in token.split(","):
        found = _PART.fullmatch(part)
        if found is None:
            raise ApiError(400, f"token must be partition:offset pairs joined by ',' (as POST …/turns answers), "
                                f"got {part[:40]!r}")
        partition, offset = int(found.group(1)), int(found.group(2))
        positions[partition] = max(offset, positions.get(partition, -1))
    return positions


def merged(positions: dict[int, int], partition: int, offset: int) -> None:
    positions[partition] = max(offset, positions.get(partition, -1))


@dataclass(frozen=True)
class Wait:
    wait: str  # applied | extracted
    timeout: float  # seconds
    token: dict[int, int]  # empty on POST …/turns (its own turns are the token)


def wait_of(query, max_seconds: float, token_needed: bool) -> Wait | None:
    """The request's `?wait=applied|extracted&timeout=S[&token=T]`, or None without `wait`; 400 for a
    value out of bounds or a token missing where one is needed."""
    wait = query.get("wait")
    if wait is None:
        for name in ("timeout", "token") if token_needed else ("timeout",):  # a turn's status reads a token alone
            if name in query:
                raise ApiError(400, f"{name!r} goes with wait=applied|extracted")
        return None
    if wait not in WAITS:
        raise ApiError(400, f"wait must be one of {WAITS}, got {wait[:20]!r}")
    raw = query.get("timeout", str(max_seconds))
    try:
        timeout = float(raw)
    except ValueError:
        raise ApiError(400, f"timeout must be a number of seconds, got {raw[:20]!r}") from None
    if not 0 < timeout <= max_seconds:  # NaN fails this too
        raise ApiError(400, f"timeout must be over 0 and at most {max_seconds:g} seconds, got {raw[:20]!r}")
    token = query.get("token")
    if token is None and token_needed:
        raise ApiError(400, "wait needs the token POST …/turns answered (?token=)")
    return Wait(wait, timeout, decode(token) if token is not None else {})
