"""The whole pipeline against an OpenAI-compatible server that fails 30% of its calls (stalls past the
client timeout, HTTP 500/429, malformed and schema-invalid JSON; seeded) and answers late (0-0.5 s,
seeded): every fact is processed exactly once, so the final entries are exactly those of the
deterministic offline `rules` backend on the same input.

Some calls exhaust their retries on purpose (max_retries=2): the runner posts "failed" and the scope
re-issues the request on its next 1 s tick, so that path must converge to the same end state too."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from credence.config.llm import LLMSettings
from tests.support.openai_server import OpenAICompatibleServer
from tests.support.pipeline import (
    PARTITIONS,
    REPLAY_PIPELINE,
    entry_diff,
    entry_digest,
    journal_mismatch,
    request_outcomes,
    run_pipeline,
    sample_lines,
    stage1_fact_ids,
    topic_values,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

# Four of the sample's six scopes (about 190 turns): enough for Stage-1, Stage-2, synthesis, sweeps and
# archiving, and quick on two cores.
SCOPES = ["acme/alice/tutor", "acme/bob/barista", "globex/dan/coach", "initech/erin/tutor"]
FAILURE_KINDS = ("timeout", "http_500", "http_429", "bad_json", "schema_invalid")


@pytest.fixture
def flaky_server():
    # Late answers (up to 0.5 s) stay inside the client's 1 s timeout; a stall (1.5 s) does not. Lateness
    # is the same path at any size: any delay puts answers behind later input, and the run's calls follow
    # one another per scope, so every half second of it is paid dozens of times over.
    server = OpenAICompatibleServer(failure_rate=0.3, failure_kinds=FAILURE_KINDS, seed=11, stall_s=1.5,
                                    delay_s=(0.0, 0.5))
    server.start()
    yield server
    server.stop()


def story(run) -> list[tuple]:
    return sorted((e["event_id"], e["event"], e["cause"], e["at"]) for e in run.journal)


def test_flaky_llm_server_gives_the_same_entries_as_rules(flaky_server, settings_factory, topic_prefix,
                                                         kafka_bootstrap, tmp_path):
    lines = sample_lines(SCOPES)
    llm = LLMSettings(backend="openai", base_url=flaky_server.base_url, model=flaky_server.model,
                      timeout_s=1.0, max_retries=2, max_concurrency=8, backoff_base_s=0.01, backoff_max_s=0.05)
    flaky = settings_factory(topic_partitions=PARTITIONS, pipeline=REPLAY_PIPELINE, llm=llm)
    rules = settings_factory(topic_partitions=PARTITIONS, pipeline=REPLAY_PIPELINE,
                             topic_prefix=f"{topic_prefix}r", app_id=f"{topic_prefix}r-app",
                             data_dir=tmp_path / "data-rules",
                             # through the runner and the result topics, as the server's answers go (the
                             # rules default answers in the batch: promotions would land elsewhere)
                             llm=LLMSettings(backend="rules", inline_in_process=False))

    # The two workers share nothing but the broker: run them side by side.
    with ThreadPoolExecutor(2) as pool:
        # Answers up to 0.5 s late, one scope's calls one after another: minutes, not the default 90 s.
        flaky_f = pool.submit(run_pipeline, flaky, kafka_bootstrap, lines, tmp_path / "openai.log",
                              deadline_s=400.0)
        rules_f = pool.submit(run_pipeline, rules, kafka_bootstrap, lines, tmp_path / "rules.log")
        flaky_run, rules_run = flaky_f.result(), rules_f.result()

    # The server saw only well-formed requests, and failures really happened and were retried.
    assert flaky_server.violations == []
    outcomes = flaky_server.outcomes()
    injected = sum(n for kind, n in outcomes.items() if kind != "ok")
    assert injected >= 10 and {"timeout", "http_500", "bad_json", "schema_invalid"} <= set(outcomes), outcomes
    llm_stats = flaky_run.status["llm"]["stats"]
    # Stalls past the timeout and 429s lowered the adaptive limit, never outside [1, max_concurrency].
    assert 1 <= flaky_run.status["llm"]["concurrency_limit"] <= 8
    assert llm_stats["retries"] > 0, llm_stats
    # max_retries=2 lets some calls exhaust their retries: the runner posts "failed", the scope re-issues
    # the request on its next step (a 1 s tick), and the request still ends with exactly one result.
    assert llm_stats["failures"] > 0, llm_stats
    results, failed = request_outcomes(kafka_bootstrap, flaky)
    assert sum(failed.values()) == llm_stats["failures"]
    assert set(failed) <= set(results), "a failed request was never re-issued to a result"
    assert {r: n for r, n in results.items() if n != 1} == {}, "a request got more than one result"
    assert flaky_run.status["llm"]["backend"].startswith("openai-compatible")
    assert rules_run.status["llm"]["backend"].startswith("rules")

    # Same input, same turns taken in, same final entries: ids, statuses, evidence, versions, times.
    assert flaky_run.status["stats"]["turns_accepted"] == rules_run.status["stats"]["turns_accepted"] == \
        sum(v["turns"] for v in rules_run.views.values())
    assert rules_run.entries, "the sample produced no entries at all"
    assert entry_digest(flaky_run.entries) == entry_digest(rules_run.entries), \
        entry_diff(flaky_run.entries, rules_run.entries)
    for scope in SCOPES:
        a, b = flaky_run.views[scope], rules_run.views[scope]
        assert [(e["id"], e["status"], e["tier"], e["score"], e["version"]) for e in a["entries"]] == \
            [(e["id"], e["status"], e["tier"], e["score"], e["version"]) for e in b["entries"]], scope
        assert a["memory_block"] == b["memory_block"], scope
    # The journals tell the same story (a failure never shows up as an extra or missing event), and the
    # flaky run's journal folds to exactly its tables.
    assert story(flaky_run) == story(rules_run)
    assert journal_mismatch(flaky_run) == {}

    # Stage-1 results on credence.facts: every fact id once across the whole topic, and the same facts
    # as the rules run extracted.
    flaky_facts = stage1_fact_ids(kafka_bootstrap, flaky)
    rules_facts = stage1_fact_ids(kafka_bootstrap, rules)
    assert flaky_facts and {i: n for i, n in flaky_facts.items() if n > 1} == {}
    assert set(flaky_facts) == set(rules_facts)


def test_a_server_down_for_a_stretch_of_a_replay_loses_no_fact(settings_factory, topic_prefix, kafka_bootstrap,
                                                                tmp_path):
    # The first 60 calls get HTTP 503: with one client retry and max_request_failures=2, the first
    # requests of every scope fail past the limit several times over. They wait (journalled facts_failed)
    # and are re-issued on the 1 s replay ticks until the server answers; the run then ends exactly where
    # the rules run does, every fact processed, nothing dead-lettered.
    scopes = SCOPES[:2]
    lines = sample_lines(scopes)
    pipeline = REPLAY_PIPELINE.model_copy(update={"max_request_failures": 2})
    with OpenAICompatibleServer(down_for=60) as server:
        llm = LLMSettings(backend="openai", base_url=server.base_url, model=server.model, timeout_s=5,
                          max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05)
        down = settings_factory(topic_partitions=PARTITIONS, pipeline=pipeline, llm=llm)
        rules = settings_factory(topic_partitions=PARTITIONS, pipeline=pipeline,
                                 topic_prefix=f"{topic_prefix}r", app_id=f"{topic_prefix}r-app",
                                 data_dir=tmp_path / "data-rules", llm=LLMSettings(inline_in_process=False))
        with ThreadPoolExecutor(2) as pool:
            down_f = pool.submit(run_pipeline, down, kafka_bootstrap, lines, tmp_path / "openai.log",
                                 deadline_s=300.0)
            rules_f = pool.submit(run_pipeline, rules, kafka_bootstrap, lines, tmp_path / "rules.log")
            down_run, rules_run = down_f.result(), rules_f.result()
        assert server.violations == []
        assert server.outcomes()["http_503"] == 60

    results, failed = request_outcomes(kafka_bootstrap, down)
    assert max(failed.values()) > 2, failed  # past max_request_failures: dead-lettered before
    # no request given up (the sample's own malformed input lines are dead-lettered in both runs)
    assert [d for d in topic_values(kafka_bootstrap, down, "dlq") if d["topic"].startswith("request:")] == []
    assert set(failed) <= set(results), "a failed request was never answered"
    assert rules_run.entries and entry_digest(down_run.entries) == entry_digest(rules_run.entries), \
        entry_diff(down_run.entries, rules_run.entries)
    assert set(stage1_fact_ids(kafka_bootstrap, down)) == set(stage1_fact_ids(kafka_bootstrap, rules))
