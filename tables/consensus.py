"""External consensus: how far a verification pipeline or an operator corroborates an entry.

A score in [0, 1] with who set it and when. It is not user evidence: it never changes the evidence score
or tier. The usage sweep skips an entry whose consensus reaches ``consensus_skip_at`` ("external
corroboration overrides internal-use signal").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from credence.errors import DomainError
from credence.tables.clock import as_utc, format_instant, parse_instant


@dataclass(frozen=True, slots=True)
class Consensus:
    score: float
    by: str
    at: datetime

    def __post_init__(self) -> None:
        score = self.score
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score) \
                or not 0.0 <= score <= 1.0:
            raise DomainError(f"consensus score must be a number from 0 to 1, got {score!r}")
        if not isinstance(self.by, str) or not self.by.strip():
            raise DomainError(f"consensus by must name who set it (a non-empty string), got {self.by!r}")
        if not isinstance(self.at, datetime):
            raise DomainError(f"consensus at must be an instant, got {self.at!r}")
        object.__setattr__(self, "score", float(score))
        object.__setattr__(self, "at", as_utc(self.at))

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "by": self.by, "at": format_instant(self.at)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Consensus | None:
        """Read a snapshot's consensus; None (never set, or written before consensus existed) stays None."""
        if d is None:
            return None
        if not isinstance(d, Mapping):
            raise DomainError(f"consensus must be a JSON object or null, got {type(d).__name__}")
        at = parse_instant(d.get("at"))
        if at is None:
            raise DomainError(f"consensus at {d.get('at')!r} is not an ISO-8601 timestamp")
        return cls(d.get("score"), d.get("by"), at)
