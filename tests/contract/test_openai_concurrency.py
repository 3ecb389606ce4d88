"""The backend never has more than max_concurrency requests in flight, and does reach it."""

import asyncio

import pytest

from credence.streams.llm import make_backend
from credence.streams.llm.models import Turn


@pytest.mark.parametrize("limit", [1, 3])
def test_in_flight_requests_stay_within_max_concurrency(openai_server_factory, llm_settings_factory, limit):
    # The server holds requests until `limit` overlap, so reaching the bound is observed, not hoped for.
    server = openai_server_factory(hold_until_in_flight=limit)
    settings = llm_settings_factory(server, max_concurrency=limit)
    turns = [[Turn(id=f"t{i}", role="user", text=f"I love thing {i}", ts="x")] for i in range(24)]

    async def go():
        backend = make_backend(settings)
        try:
            return await asyncio.gather(*(backend.extract_facts(batch) for batch in turns))
        finally:
            await backend.aclose()

    results = asyncio.run(go())
    assert all(len(facts) == 1 for facts in results)
    assert server.max_in_flight == limit
    assert server.outcomes() == {"ok": 24}
    assert server.violations == []


def test_retries_keep_within_max_concurrency(openai_server_factory, llm_settings_factory):
    server = openai_server_factory(failure_rate=0.4, failure_kinds=["timeout", "http_500"], seed=3,
                                   hold_until_in_flight=2)
    settings = llm_settings_factory(server, max_concurrency=2, max_retries=10)
    turns = [[Turn(id=f"t{i}", role="user", text=f"I hate thing {i}", ts="x")] for i in range(12)]

    async def go():
        backend = make_backend(settings)
        try:
            await asyncio.gather(*(backend.extract_facts(batch) for batch in turns))
            return backend.stats
        finally:
            await backend.aclose()

    stats = asyncio.run(go())
    assert stats.retries > 0 and stats.failures == 0
    assert server.max_in_flight == 2
    assert server.violations == []
