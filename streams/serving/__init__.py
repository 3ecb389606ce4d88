"""What a worker serves beyond the stream: explicit recall, /metrics and the read-only memory browser."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from credence.streams.llm.embeddings import Encode, LazyEncoder, extra_installed, load_encoder

if TYPE_CHECKING:
    from credence.streams.runtime.container import Credence

log = logging.getLogger(__name__)


def recall_encoder(pipeline, shared: Encode | None = None) -> Encode | None:
    """The encoder of recall's cosine ranker, or None for BM25 only (see PipelineSettings.recall_cosine).
    The Stage-2 pre-rank's encoder is shared when there is one; otherwise the model loads lazily."""
    if pipeline.recall_cosine is False:
        return None
    if shared is not None:
        return shared
    if not extra_installed():
        if pipeline.recall_cosine:
            load_encoder(pipeline.embedding_model_path)  # raises ConfigError saying what to install
        return None
    return LazyEncoder(pipeline.embedding_model_path)


def recall_service(pipeline, shared: Encode | None = None):
    """The worker's recall service (one index cache, one model), built before the runtime that holds it
    as `credence.recall` (the /v1 recall route and /metrics read it there)."""
    from credence.streams.serving.recall import RecallService

    return RecallService(encoder=recall_encoder(pipeline, shared))


def register(credence: Credence) -> None:
    """Load recall's model once the worker runs, when it loads lazily. /metrics and /browser are mounted
    by their own modules' `register` (streams/ops/worker.py)."""
    settings = credence.settings
    encoder = credence.recall.encoder if credence.recall is not None else None
    if isinstance(encoder, LazyEncoder) and settings.pipeline.recall_warm_up and settings.web_port != 0:

        @credence.app.task
        async def warm_up_recall() -> None:
            await _warm_up(encoder)


async def _warm_up(encoder: LazyEncoder) -> None:
    """Load recall's model in a thread once the worker runs, so recall ranks by cosine as soon as it can.
    A recall that comes first answers by BM25 alone (RecallService.cosine_ready); a load that fails is
    logged and tried again by the next recall."""
    started = time.perf_counter()
    try:
        await asyncio.to_thread(encoder.load)
    except Exception:  # noqa: BLE001 - recall still answers by BM25 if the model never loads
        log.exception("loading recall's embedding model failed; the first recall will try again")
        return
    log.info("recall's embedding model loaded in %.1f s", time.perf_counter() - started)
