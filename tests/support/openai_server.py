"""An OpenAI-compatible chat-completions server on 127.0.0.1 for contract tests.

It answers each task with the rules backend's logic and checks every request the way production
relies on: the configured model, the task's exact static system prefix, the task's output schema sent
strictly, temperature 0, max_tokens within the task cap, and (Stage 2) the prompt within the token
caps. A request that breaks a check gets HTTP 400 and is recorded in ``violations``.

On demand it fails like a real overloaded server: a seeded, order-independent choice per request
among stalling past the client timeout, HTTP 500, HTTP 429, malformed JSON, schema-invalid content
and content naming an unknown id. Plain stdlib server in threads, so sync and async tests both use it.
"""

from __future__ import annotations

import hashlib
import json
import random
import select
import socket
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from credence.streams.llm.models import Fact
from credence.streams.llm.prompts import (
    TASKS,
    candidate_rerank,
    merge_decision,
    negative_keyword_target,
    reflection_synthesis,
    stage1_extraction,
    stage2_classification,
    surfaced_feedback,
)
from credence.streams.llm.prompts.base import INPUT_MARKER, schema_name
from credence.streams.llm.rules import extraction, feedback, matching, synthesis
from credence.streams.llm.token_budget import approx_tokens

FAILURE_KINDS = ("timeout", "http_500", "http_429", "bad_json", "schema_invalid", "unknown_id")


# -- answers: the rules logic in each task's wire format ---------------------------------------

def _facts(refs: list[stage2_classification.FactRef]) -> list[Fact]:
    return [
        Fact(id=r.id, text=r.text, subject=r.subject, polarity=r.polarity, importance=5, source_turn_ids=[])
        for r in refs
    ]


def _stage1(inp: stage1_extraction.Input) -> BaseModel:
    return stage1_extraction.Output(facts=[
        stage1_extraction.ExtractedFact(
            text=f.text, subject=f.subject, importance=f.importance, polarity=f.polarity,
            source_turn_ids=f.source_turn_ids,
        )
        for f in extraction.extract_facts(inp.turns)
    ])


def _stage2(inp: stage2_classification.Input) -> BaseModel:
    return stage2_classification.Output(classifications=[
        stage2_classification.Pair(fact_id=c.fact_id, observation_id=c.observation_id, relation=c.relation)
        for c in matching.classify(_facts(inp.facts), inp.observations)
    ])


def _rerank(inp: candidate_rerank.Input) -> BaseModel:
    return candidate_rerank.Output(observation_ids=matching.rerank(_facts(inp.facts), inp.observations, inp.limit))


def _feedback(inp: surfaced_feedback.Input) -> BaseModel:
    return surfaced_feedback.Output(decisions=[
        surfaced_feedback.Decision(id=d.id, decision=d.decision)
        for d in feedback.check_feedback(inp.reply_text, inp.surfaced)
    ])


def _target(inp: negative_keyword_target.Input) -> BaseModel:
    return negative_keyword_target.Output(target_ids=matching.target_check(inp.last_user_messages, inp.observations))


def _synthesis(inp: reflection_synthesis.Input) -> BaseModel:
    return reflection_synthesis.Output(reflections=[
        reflection_synthesis.Draft(text=r.text, subject=r.subject, source_fact_ids=r.source_fact_ids)
        for r in synthesis.synthesize(inp.facts)
    ])


def _merge(inp: merge_decision.Input) -> BaseModel:
    d = synthesis.merge_decision(inp.reflection, inp.persona_entries)
    return merge_decision.Output(action=d.action, target_id=d.target_id, text=d.text)


ANSWERS: dict[str, Callable[[Any], BaseModel]] = {
    stage1_extraction.NAME: _stage1,
    stage2_classification.NAME: _stage2,
    candidate_rerank.NAME: _rerank,
    surfaced_feedback.NAME: _feedback,
    negative_keyword_target.NAME: _target,
    reflection_synthesis.NAME: _synthesis,
    merge_decision.NAME: _merge,
}

GHOST = "ghost-id-not-in-input"


def _ghost_stage1(out: dict) -> dict:
    fact = {"text": "The user likes ghosts.", "subject": "ghost", "importance": 5, "polarity": "positive",
            "source_turn_ids": [GHOST]}
    return {"facts": [*out["facts"], fact]}


def _ghost_stage2(out: dict, inp: stage2_classification.Input) -> dict:
    pair = {"fact_id": inp.facts[0].id, "observation_id": GHOST, "relation": "reinforce"}
    return {"classifications": [*out["classifications"], pair]}


# Output that passes the schema but names an id the input never had.
UNKNOWN_ID: dict[str, Callable[[dict, Any], dict]] = {
    stage1_extraction.NAME: lambda out, inp: _ghost_stage1(out),
    stage2_classification.NAME: _ghost_stage2,
    candidate_rerank.NAME: lambda out, inp: {"observation_ids": [GHOST]},
    surfaced_feedback.NAME: lambda out, inp: {"decisions": [*out["decisions"], {"id": GHOST, "decision": "deny"}]},
    negative_keyword_target.NAME: lambda out, inp: {"target_ids": [GHOST]},
    reflection_synthesis.NAME: lambda out, inp: {"reflections": [{"text": "x", "subject": "x", "source_fact_ids": [GHOST]}]},
    merge_decision.NAME: lambda out, inp: {"action": "merge", "target_id": GHOST, "text": "x"},
}


# -- the server ---------------------------------------------------------------------------------

_BY_PREFIX: dict[str, ModuleType] = {module.SYSTEM: module for module in TASKS.values()}


class _Refused(Exception):
    """The request broke a check: answered with 400 and recorded as a violation."""


@dataclass(frozen=True)
class RequestRecord:
    task: str | None
    outcome: str  # "ok", a FAILURE_KINDS entry, or "violation"
    in_flight: int  # requests being handled when this one arrived, itself included


class OpenAICompatibleServer:
    def __init__(
        self,
        *,
        model: str = "credence-test-model",
        failure_rate: float = 0.0,
        failure_kinds: Sequence[str] = FAILURE_KINDS,
        seed: int = 0,
        stall_s: float = 5.0,
        retry_after: str = "0",
        hold_until_in_flight: int = 0,
        hold_timeout_s: float = 5.0,
        observation_cap: int = 200,
        prompt_cap: int = 15_000,
        count_tokens: Callable[[str], int] = approx_tokens,
        delay_s: tuple[float, float] = (0.0, 0.0),
    ) -> None:
        assert set(failure_kinds) <= set(FAILURE_KINDS), failure_kinds
        self.model = model
        self.failure_rate = failure_rate
        self.failure_kinds = tuple(failure_kinds)
        self.seed = seed
        self.stall_s = stall_s
        self.retry_after = retry_after
        self.hold_until_in_flight = hold_until_in_flight
        self.hold_timeout_s = hold_timeout_s
        self.observation_cap = observation_cap
        self.prompt_cap = prompt_cap
        self.count_tokens = count_tokens
        self.delay_s = delay_s  # every answer is late by a seeded amount in this range: a slow server
        self.records: list[RequestRecord] = []
        self.violations: list[str] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._released = hold_until_in_flight <= 0
        self._seen: Counter[str] = Counter()
        self._state = threading.Condition()
        self._stop = threading.Event()
        self._stalled: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> OpenAICompatibleServer:
        handler = type("Handler", (_Handler,), {"owner": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        # A short poll interval only bounds how long stop() takes; requests are served as they come.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="openai-test-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._state:
            self._released = True
            self._state.notify_all()
            for sock in self._stalled:
                _shutdown(sock)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- queries for assertions -----------------------------------------------------------------

    def outcomes(self, task: str | None = None) -> Counter[str]:
        with self._state:
            return Counter(r.outcome for r in self.records if task is None or r.task == task)

    # -- request handling (called from handler threads) -------------------------------------------

    def _enter(self) -> int:
        with self._state:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self._in_flight >= self.hold_until_in_flight:
                self._released = True
                self._state.notify_all()
            # Holding requests until enough overlap makes a concurrency bound observable, not luck.
            self._state.wait_for(lambda: self._released, timeout=self.hold_timeout_s)
            return self._in_flight

    def _leave(self) -> None:
        with self._state:
            self._in_flight -= 1

    def _record(self, task: str | None, outcome: str, in_flight: int, violation: str | None = None) -> None:
        with self._state:
            self.records.append(RequestRecord(task, outcome, in_flight))
            if violation:
                self.violations.append(f"{task or '?'}: {violation}")

    def _failure_for(self, raw: bytes) -> str | None:
        """Seeded by the request's content and how often it was seen, so the choice does not depend
        on which concurrent request happens to arrive first."""
        digest = hashlib.sha256(raw).hexdigest()
        with self._state:
            self._seen[digest] += 1
            nth = self._seen[digest]
        rng = random.Random(f"{self.seed}:{digest}:{nth}")
        if rng.random() < self.failure_rate:
            return rng.choice(self.failure_kinds)
        return None

    def _pause(self, raw: bytes) -> None:
        low, high = self.delay_s
        if high > 0:
            rng = random.Random(f"{self.seed}:delay:{hashlib.sha256(raw).hexdigest()}")
            self._stop.wait(rng.uniform(low, high))

    def _check(self, body: Any) -> tuple[ModuleType, BaseModel]:
        if not isinstance(body, dict):
            raise _Refused("body is not a JSON object")
        if body.get("model") != self.model:
            raise _Refused(f"model {body.get('model')!r} != {self.model!r}")
        messages = body.get("messages")
        if not (isinstance(messages, list) and len(messages) == 2
                and [m.get("role") for m in messages] == ["system", "user"]):
            raise _Refused("messages must be exactly [system, user]")
        module = _BY_PREFIX.get(messages[0].get("content"))
        if module is None:
            raise _Refused("system message is not any task's static prefix")
        expected_format = {
            "type": "json_schema",
            "json_schema": {"name": schema_name(module.NAME, module.VERSION),
                            "schema": module.Output.model_json_schema(), "strict": True},
        }
        if body.get("response_format") != expected_format:
            raise _Refused("response_format is not the task's strict output schema")
        if body.get("temperature") != 0:
            raise _Refused(f"temperature {body.get('temperature')!r} != 0")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or not 0 < max_tokens <= module.MAX_TOKENS:
            raise _Refused(f"max_tokens {max_tokens!r} missing or above the cap {module.MAX_TOKENS}")
        user = messages[1].get("content") or ""
        if not user.startswith(INPUT_MARKER):
            raise _Refused("user message lacks the input marker")
        try:
            payload = module.Input.model_validate_json(user[len(INPUT_MARKER):])
        except ValidationError as exc:
            raise _Refused(f"user message input does not validate: {exc}") from exc
        if module is stage2_classification:
            self._check_stage2(user, payload)
        return module, payload

    def _check_stage2(self, user: str, payload: stage2_classification.Input) -> None:
        total = self.count_tokens(stage2_classification.SYSTEM) + self.count_tokens(user)
        if total > self.prompt_cap:
            raise _Refused(f"Stage-2 prompt is {total} tokens, above the cap {self.prompt_cap}")
        for obs in payload.observations:
            if self.count_tokens(obs.text) > self.observation_cap:
                raise _Refused(f"observation {obs.id} above {self.observation_cap} tokens")

    def _content(self, module: ModuleType, payload: BaseModel, failure: str | None) -> str:
        out = ANSWERS[module.NAME](payload).model_dump(mode="json")
        if failure == "bad_json":
            return json.dumps(out)[:-2] + "},"
        if failure == "schema_invalid":
            return json.dumps({"unexpected": True})
        if failure == "unknown_id":
            return json.dumps(UNKNOWN_ID[module.NAME](out, payload))
        return json.dumps(out)

    def _completion(self, messages: list[dict[str, str]], content: str) -> dict[str, Any]:
        prompt_tokens = sum(self.count_tokens(m["content"]) for m in messages)
        completion_tokens = self.count_tokens(content)
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }

    def _stall(self, sock: socket.socket) -> None:
        """Answer nothing until the client gives up (closes) or stall_s passes: a server too slow."""
        with self._state:
            self._stalled.add(sock)
        try:
            if not self._stop.is_set():
                select.select([sock], [], [], self.stall_s)
        finally:
            with self._state:
                self._stalled.discard(sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAICompatibleServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; don't wait on delayed ACKs

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean; the server records what matters

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        server = self.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        in_flight = server._enter()
        task: str | None = None
        try:
            if self.path != "/v1/chat/completions":
                server._record(None, "violation", in_flight, f"unexpected path {self.path}")
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            try:
                body = json.loads(raw)
                module, payload = server._check(body)
            except (ValueError, _Refused) as exc:
                server._record(task, "violation", in_flight, str(exc))
                return self._send(400, {"error": {"message": str(exc)}})
            task = module.NAME
            server._pause(raw)
            failure = server._failure_for(raw)
            server._record(task, failure or "ok", in_flight)
            if failure == "timeout":
                server._stall(self.connection)
                self.close_connection = True
                return None
            if failure == "http_500":
                return self._send(500, {"error": {"message": "injected server error"}})
            if failure == "http_429":
                return self._send(429, {"error": {"message": "injected rate limit"}}, {"Retry-After": server.retry_after})
            content = server._content(module, payload, failure)
            return self._send(200, server._completion(body["messages"], content))
        finally:
            server._leave()

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the client already hung up
