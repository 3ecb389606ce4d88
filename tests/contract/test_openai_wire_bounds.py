"""The test server tells the truth: on any input, every task's answer is one the request's own schema
accepts (string lengths, item counts, enums), never a crash of the server."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credence.streams.llm.models import CorrectionItem, Fact, Observation, ReflectionDraft, Turn
from credence.streams.llm.openai_backend import response_format
from credence.streams.llm.prompts import (
    candidate_rerank,
    correction,
    merge_decision,
    negative_keyword_target,
    refine_cluster,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from tests.support.openai_server import OpenAICompatibleServer

_TEMPLATES = ["I love {x}", "I really hate {x}", "my name is {x}", "I am learning {x}", "I live in {x}",
              "I have a dog named {x}", "I no longer {x}", "I prefer {x} over tea", "I work as {x}"]
# Long words make long subjects: the rules logic keys a subject on up to eight words of the object.
_long_phrase = st.lists(st.text(st.characters(categories=["L"]), min_size=8, max_size=20), min_size=1, max_size=8)
_object = st.one_of(st.text(max_size=120), _long_phrase.map(" ".join))
_utterance = st.one_of(st.text(max_size=200),
                       st.builds(lambda t, x: t.format(x=x), st.sampled_from(_TEMPLATES), _object))
_subject = st.one_of(st.text(max_size=80), _long_phrase.map(" ".join))
_score = st.one_of(st.none(), st.floats(0, 1))


def _turns(texts_roles: list[tuple[str, str]]) -> list[Turn]:
    return [Turn(id=f"turn-{i}", role=role, text=text, ts="2026-01-01T00:00:00Z")
            for i, (text, role) in enumerate(texts_roles)]


_turn_list = st.lists(st.tuples(_utterance, st.sampled_from(["user", "ai"])), min_size=1, max_size=6).map(_turns)
_facts = st.lists(st.tuples(_utterance, _subject, st.sampled_from(["positive", "negative"]), st.integers(1, 10)),
                  min_size=1, max_size=5).map(lambda rows: [
                      Fact(id=f"fact-{i}", text=t, subject=s, polarity=p, importance=imp, source_turn_ids=["turn-0"])
                      for i, (t, s, p, imp) in enumerate(rows)])
_observations = st.lists(st.tuples(_utterance, _subject, _score), min_size=1, max_size=6).map(lambda rows: [
    Observation(id=f"obs-{i}", text=t, subject=s, score=sc) for i, (t, s, sc) in enumerate(rows)])

# Each task's call, built from arbitrary input exactly as the openai backend builds it.
CALLS = {
    stage1_extraction: _turn_list.map(stage1_extraction.build),
    stage2_classification: st.builds(stage2_classification.build, _facts, _observations),
    candidate_rerank: st.builds(candidate_rerank.build, _facts, _observations, st.integers(1, 8)),
    surfaced_feedback: st.builds(surfaced_feedback.build, _utterance, _observations, _utterance),
    negative_keyword_target: st.builds(negative_keyword_target.build, st.lists(_utterance, min_size=1, max_size=3),
                                       _observations, _utterance),
    reflection_synthesis: st.builds(reflection_synthesis.build, _facts, _observations),
    merge_decision: st.builds(merge_decision.build,
                              st.builds(lambda t, s, sc: ReflectionDraft(text=t, subject=s, source_fact_ids=[],
                                                                         score=sc), _utterance, _subject, _score),
                              _observations | st.just([])),
    # -- correction work --
    correction: _observations.map(lambda obs: correction.build(
        [CorrectionItem(id=f"c-{i}", old=o, new_text=o.text[::-1] or "x", new_score=o.score)
         for i, o in enumerate(obs)])),
    refine_cluster: st.builds(refine_cluster.build, _observations),
}


@pytest.fixture(scope="module")
def server():
    with OpenAICompatibleServer() as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.base_url + "/", timeout=10) as http:
        yield http


def _ask(client: httpx.Client, server: OpenAICompatibleServer, module, call) -> tuple[httpx.Response, dict]:
    fmt = response_format(module, call)
    body = {"model": server.model, "temperature": 0, "max_tokens": module.MAX_TOKENS, "response_format": fmt,
            "messages": [{"role": "system", "content": module.SYSTEM},
                         {"role": "user", "content": module.render_user(call.payload)}]}
    return client.post("chat/completions", json=body), fmt["json_schema"]["schema"]


def _assert_schema_valid_answer(client, server, module, call) -> dict:
    before = len(server.violations)
    response, schema = _ask(client, server, module, call)
    assert server.violations[before:] == []
    assert response.status_code == 200, response.text[:300]
    answer = json.loads(response.json()["choices"][0]["message"]["content"])
    jsonschema.validate(answer, schema)
    module.Output.model_validate(answer)
    return answer


@pytest.mark.parametrize("module", list(CALLS), ids=lambda m: m.NAME)
def test_every_answer_fits_the_schema_the_request_carried(client, server, module):
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(call=CALLS[module])
    def check(call):
        _assert_schema_valid_answer(client, server, module, call)

    check()


def test_a_long_subject_is_cut_to_the_wire_bound_not_a_server_crash(client, server):
    # Measured on real long-form text: the rules subject ran past 40 characters and the server raised.
    text = "I love the extraordinarily magnificent incomprehensibilities of internationalization"
    call = stage1_extraction.build(_turns([(text, "user")]))
    answer = _assert_schema_valid_answer(client, server, stage1_extraction, call)
    assert len(answer["facts"]) == 1
    assert len(answer["facts"][0]["subject"]) == 40


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=10)
_keys = ("model", "messages", "temperature", "max_tokens", "response_format")
_bodies = st.one_of(_json, st.fixed_dictionaries({k: _json for k in _keys}),
                    st.fixed_dictionaries({"model": st.just("credence-test-model"),
                                           "messages": st.lists(_json | st.dictionaries(st.sampled_from(
                                               ["role", "content"]), _json), min_size=2, max_size=2)}))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_bodies)
def test_a_malformed_request_gets_a_400_never_a_dropped_connection(client, server, body):
    response = client.post("chat/completions", json=body)
    assert response.status_code == 400, response.text[:300]
