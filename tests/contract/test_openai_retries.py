"""Retries: a flaky server loses and duplicates nothing; a dead one ends in LLMError after max_retries."""

import asyncio
import itertools

import pytest

from credence.errors import LLMError
from credence.streams.llm.factory import make_backend
from credence.streams.llm.models import Observation
from credence.streams.llm.prompts import (
    negative_keyword_target,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.rules.backend import RulesBackend

FLAKY_KINDS = ["timeout", "http_500", "http_429", "bad_json", "schema_invalid", "unknown_id"]


def _batches(items, size):
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def test_thirty_percent_failures_lose_and_duplicate_nothing(
    openai_server_factory, llm_settings_factory, fifty_turns, observations
):
    # No refuse_repeats: with short aliases, batches 0-1 and 40-41 are legitimately identical requests.
    server = openai_server_factory(failure_rate=0.3, failure_kinds=FLAKY_KINDS, seed=7)
    # The counts below hold only if no answer is late: at 0.3 s a loaded CI host let an "ok" answer miss the
    # client's deadline, be retried and counted twice. An injected timeout stalls until the client gives up.
    settings = llm_settings_factory(server, max_retries=8, timeout_s=2.0)
    rules = RulesBackend()
    # Asked per batch, as the pipeline asks: one answer carries at most the wire's MAX_FACTS.
    expected_facts = [f for b in _batches(fifty_turns, 2) for f in asyncio.run(rules.ask(stage1_extraction, b))]
    expected_pairs = asyncio.run(rules.ask(stage2_classification, expected_facts, observations, fit=rules.budget))

    async def pipeline():
        backend = make_backend(settings)
        try:
            extracted = await asyncio.gather(*(backend.ask(stage1_extraction, b) for b in _batches(fifty_turns, 2)))
            facts = [f for batch in extracted for f in batch]
            classified = await asyncio.gather(*(backend.ask(stage2_classification, b, observations, fit=backend.budget)
                                                for b in _batches(facts, 2)))
            return facts, [c for batch in classified for c in batch], backend.stats
        finally:
            await backend.aclose()

    facts, pairs, stats = asyncio.run(pipeline())

    assert len(expected_facts) == 40
    assert [f.id for f in facts] == [f.id for f in expected_facts]  # every fact, once, in order
    assert sorted(pairs, key=repr) == sorted(expected_pairs, key=repr)
    assert len({(p.fact_id, p.observation_id) for p in pairs}) == len(pairs)
    assert {p.relation for p in pairs} == {"reinforce", "negate"}

    outcomes = server.outcomes()
    # An answer naming an unknown id is used (that item dropped), not retried.
    retried = sum(n for kind, n in outcomes.items() if kind not in ("ok", "unknown_id"))
    assert outcomes["ok"] + outcomes["unknown_id"] == stats.calls == 25 + 20
    assert retried >= 8 and {k for k in outcomes if k != "ok"} >= {"timeout", "http_500", "bad_json", "unknown_id"}
    assert stats.retries == retried and stats.failures == 0
    assert stats.unknown_ids >= outcomes["unknown_id"]
    assert server.violations == []


@pytest.mark.parametrize(("kind", "reason"), [("http_500", "HTTP 500"), ("http_429", "HTTP 429"),
                                              ("timeout", "timed out"), ("bad_json", "malformed JSON"),
                                              ("schema_invalid", "schema-invalid")])
def test_always_failing_server_raises_after_max_retries(openai_server_factory, llm_settings_factory, kind, reason):
    # refuse_repeats: a retry byte-identical to an earlier attempt would be a 400, not the reason below.
    server = openai_server_factory(failure_rate=1.0, failure_kinds=[kind], refuse_repeats=True)
    settings = llm_settings_factory(server, max_retries=3)

    async def go():
        backend = make_backend(settings)
        try:
            with pytest.raises(LLMError) as caught:
                await backend.ask(surfaced_feedback, "yes", [Observation(id="o1", text="The user likes tea.", subject="tea")])
            return caught.value, backend.stats
        finally:
            await backend.aclose()

    error, stats = asyncio.run(go())
    message = str(error)
    assert "surfaced_feedback failed after 4 attempts" in message and reason in message
    assert "CREDENCE_LLM__MAX_RETRIES" in message
    assert server.outcomes() == {kind: 4}
    assert (stats.calls, stats.retries, stats.failures) == (1, 3, 1)
    assert server.violations == []


def test_unreachable_server_raises_after_max_retries(openai_server_factory, llm_settings_factory):
    server = openai_server_factory()
    settings = llm_settings_factory(server, max_retries=2)
    server.stop()  # nothing listens on the port any more

    async def go():
        backend = make_backend(settings)
        try:
            await backend.ask(negative_keyword_target, ["no"], [Observation(id="o1", text="The user likes tea.", subject="tea")])
        finally:
            await backend.aclose()

    with pytest.raises(LLMError, match="after 3 attempts.*connection error"):
        asyncio.run(go())


@pytest.mark.parametrize("retry_after,ceiling", [("0.25", 1.0), ("3600", 0.3)], ids=["below", "above"])
def test_retry_after_is_honoured_up_to_the_backoff_ceiling(openai_server_factory, llm_settings_factory,
                                                           retry_after, ceiling):
    """Below the ceiling the server's Retry-After is waited out; above it (an hour) the ceiling is waited
    instead: the call still fails within a deadline no hour-long wait fits in."""
    server = openai_server_factory(failure_rate=1.0, failure_kinds=["http_429"], retry_after=retry_after)
    settings = llm_settings_factory(server, max_retries=2, backoff_max_s=ceiling)

    async def go() -> float:
        backend = make_backend(settings)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            with pytest.raises(LLMError, match="HTTP 429"):
                # a condition with a deadline, not a speed: 2 waits of the ceiling take < 1 s, an honoured
                # Retry-After of 3600 s an hour
                await asyncio.wait_for(backend.ask(negative_keyword_target,
                    ["no"], [Observation(id="o1", text="The user likes tea.", subject="tea")]), timeout=60)
            return loop.time() - started
        finally:
            await backend.aclose()

    assert asyncio.run(go()) >= 2 * min(float(retry_after), ceiling)
    assert server.outcomes() == {"http_429": 3}


def test_a_server_that_is_down_fails_transient_and_one_that_refuses_does_not(openai_server_factory,
                                                                             llm_settings_factory, fifty_turns):
    # The scope keeps a transient failure's facts waiting for the backend; a refusal is dead-lettered.
    from credence.streams.llm.runner import Runner
    from credence.streams.scope.scope_state import Request

    down = openai_server_factory(down=True)
    refusing = openai_server_factory(model="another-model")  # every request names the wrong model: 400
    req = Request(id="r1", task="stage1", payload={"turns": [t.model_dump() for t in fifty_turns[:2]]},
                  issued_at=None, boot="b")

    async def answer(server) -> dict:
        backend = make_backend(llm_settings_factory(server, max_retries=1) if server is down
                               else llm_settings_factory(server, model=down.model, max_retries=1))
        try:
            return await Runner(backend, send=None, max_inflight=4).answer("acme/u1/aria", req)
        finally:
            await backend.aclose()

    failed_down, failed_refused = asyncio.run(answer(down)), asyncio.run(answer(refusing))
    assert (failed_down["type"], failed_down["transient"]) == ("failed", True)
    assert "HTTP 503" in failed_down["error"] and down.outcomes() == {"http_503": 2}
    assert (failed_refused["type"], failed_refused["transient"]) == ("failed", False)
    assert "refused" in failed_refused["error"]
