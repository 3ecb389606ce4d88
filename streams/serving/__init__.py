"""What a worker serves beyond the stream: explicit recall, /metrics and the read-only memory browser."""

from __future__ import annotations

from credence.streams.runtime.embeddings import Encode, LazyEncoder, extra_installed, load_encoder


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


def register(credence) -> None:
    """Attach the worker's recall service (one index cache, one model) as `credence.recall`. /metrics and
    /browser are mounted by their own modules' `register` (streams/runtime/app.py)."""
    from credence.streams.serving.recall import RecallService

    credence.recall = RecallService(encoder=recall_encoder(credence.settings.pipeline, credence.encoder))
