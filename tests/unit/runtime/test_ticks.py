"""Untimed ticks (a replay's) go only to scopes with a request this worker is not answering right now."""

import asyncio
from types import SimpleNamespace

from credence.streams.llm.runner import Runner
from credence.streams.runtime.timers import tick_once
from credence.streams.scope.scope_state import Request


class _Backend:
    in_process = False

    def __init__(self):
        self.release = asyncio.Event()


def _credence(runner, open_requests: dict[str, int], advance: bool = False):
    sent = []

    async def send_many(topic, records):
        sent.extend((topic, scope, record["type"]) for scope, record in records)

    def summary(scope):
        return SimpleNamespace(requests=open_requests[scope])
    return SimpleNamespace(
        settings=SimpleNamespace(pipeline=SimpleNamespace(ticks_advance_clock=advance)),
        ownership=SimpleNamespace(busy=set(open_requests), owns=lambda scope: True),
        store=SimpleNamespace(summary=summary, scopes=lambda: list(open_requests)),
        runner=runner, agent=SimpleNamespace(send_many=send_many)), sent


def test_a_scope_whose_requests_are_all_being_answered_here_gets_no_untimed_tick(monkeypatch):
    async def go():
        release = asyncio.Event()
        posted = []

        async def send(topic, scope, record):
            posted.append(scope)

        runner = Runner(_Backend(), send, max_inflight=8)

        async def answer(scope, req):
            await release.wait()
            return {"type": "result", "request_id": req.id}

        monkeypatch.setattr(runner, "answer", answer)
        def req(n):
            return Request(id=f"r{n}", task="synthesis", payload={}, issued_at=None, boot="b")
        runner.submit("t/a/c", req(1))  # a's one open request runs here
        runner.submit("t/b/c", req(2))  # b has two open, one running here (the other failed, waiting)
        await asyncio.sleep(0)
        credence, sent = _credence(runner, {"t/a/c": 1, "t/b/c": 2, "t/d/c": 1, "t/e/c": 0})
        assert await tick_once(credence) == 2
        assert sorted(scope for _, scope, _ in sent) == ["t/b/c", "t/d/c"]
        release.set()
        await asyncio.gather(*runner.tasks)
        sent.clear()
        # answered and posted: a tick goes again (until the result is applied, as before)
        assert await tick_once(credence) == 3 and posted == ["t/a/c", "t/b/c"]
        assert runner.running == {}
        timed, sent = _credence(runner, {"t/a/c": 1, "t/e/c": 0}, advance=True)
        runner.submit("t/a/c", req(3))
        assert await tick_once(timed) == 2  # a timed tick moves every scope's clock: always sent
        release.set()
        await asyncio.gather(*runner.tasks)

    asyncio.run(go())
