"""POST …/recall: the recall service (credence.streams.serving.recall) over one scope's entries and its
character card. The service keeps one index per scope and version; a build without the `serving`
package answers 501. The encoder is the worker's own (the Stage-2 pre-rank's), so cosine is on exactly
when embeddings are on."""

from __future__ import annotations

from credence import api_models as models
from credence.errors import ApiError, CredenceError


async def recall(handlers, scope, version, entries, now, body: models.RecallRequest, memory) -> models.RecallResponse:
    service = _service(handlers)
    for name, value in (("since", body.since), ("until", body.until)):
        if value is not None and value.tzinfo is None:
            raise ApiError(422, f"{name} needs a UTC offset (e.g. 2026-01-01T12:00:00Z)")
    if version is None:  # no store version yet: the entries' own versions name the index
        version = hash(frozenset((e.id, e.version) for e in entries))
    answer = getattr(service, "aanswer", None)
    args = (scope.key, version, entries, now, body.query, body.top_k, body.since, body.until, memory)
    try:
        if answer is not None:  # the worker's service says which rankers it fused (BM25 while cosine's model loads)
            hits, rankers = await answer(*args)
        else:
            hits = service.search(*args)
            rankers = sorted({name for hit in hits for name in hit.rankers})
    except ValueError as exc:  # the service's RecallError: a request it cannot answer as asked
        raise ApiError(422, str(exc)) from None
    except CredenceError as exc:
        raise ApiError(503, f"recall failed: {exc}") from None
    tags = {e.id: list(e.tags) for e in entries}
    return models.RecallResponse(hits=[models.RecallHit(
        id=h.id, text=h.text, kind=h.kind, tier=h.tier, score=_finite(h.score), rrf=h.rrf, rankers=dict(h.rankers),
        tags=tags.get(h.id, [])) for h in hits], rankers=list(rankers))


def _finite(score: float | None) -> float | None:
    return score if score is not None and abs(score) != float("inf") else None


def available() -> bool:
    try:
        from credence.streams.serving.recall import RecallService  # noqa: F401
    except ImportError:
        return False
    return True


def _service(handlers):
    # The worker's own service (built by the composition root): its index cache, and cosine per recall_cosine.
    service = handlers.credence.recall
    if service is None:
        raise ApiError(501, "recall is not available in this build (credence.streams.serving missing)")
    return service
