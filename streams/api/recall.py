"""POST …/recall: the recall service (credence.streams.serving.recall) over one scope's entries.

The service keeps one index per scope and version; without the `serving` package this worker answers 501.
"""

from __future__ import annotations

from credence.errors import ApiError
from credence.streams.api import models


def recall(handlers, scope, version, entries, now, body: models.RecallRequest, memory) -> models.RecallResponse:
    service = _service(handlers)
    for name, value in (("since", body.since), ("until", body.until)):
        if value is not None and value.tzinfo is None:
            raise ApiError(422, f"{name} needs a UTC offset (e.g. 2026-01-01T12:00:00Z)")
    if version is None:  # no store version yet: the entries' own versions name the index
        version = hash(frozenset((e.id, e.version) for e in entries))
    hits = service.search(scope.key, version, entries, now, body.query, body.top_k, body.since, body.until, memory)
    return models.RecallResponse(hits=[models.RecallHit(
        id=h.id, text=h.text, kind=h.kind, tier=h.tier, score=h.score, rrf=h.rrf, rankers=dict(h.rankers))
        for h in hits])


def _service(handlers):
    if handlers._recall is None:
        try:
            from credence.streams.serving.recall import RecallService
        except ImportError:
            raise ApiError(501, "recall is not available in this build (credence.streams.serving missing)") from None
        handlers._recall = _make(RecallService, handlers.credence)
    return handlers._recall


def _make(cls, credence):
    try:
        return cls(credence.settings)
    except TypeError:
        return cls()
