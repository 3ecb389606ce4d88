"""An OpenAI-compatible chat-completions server on 127.0.0.1 for contract tests.

It answers each task with the rules backend's logic (applied to the aliased input it receives) and
checks every request the way production relies on: the configured model, the task's exact static
system prefix, a strict output schema that vLLM's guided decoding accepts (only allowed keywords,
closed objects, every list and free string bounded) whose id enums are exactly the aliases in that
request's input, temperature 0 on a first attempt (a retry may sample warmer and carry a repair hint
before the input marker), max_tokens within the task cap, and (Stage 2 and rerank) the prompt within
the token caps. With refuse_repeats, a byte-identical request seen before is refused too: a retry
must change something. A request that breaks a check gets HTTP 400 and is recorded in ``violations``.

With overload_above it refuses (429) a request that arrives while that many are already being handled;
with down, it answers 503 to everything until down is cleared; with down_for, to the first that many
requests (an outage, then a healthy server). On demand it also fails like a real
overloaded server: a seeded, order-independent choice per request
among stalling past the client timeout, HTTP 500, HTTP 429, malformed JSON, schema-invalid content
and content naming an id the input never had. Plain stdlib server in threads, so sync and async tests
both use it.
"""

from __future__ import annotations

import hashlib
import json
import random
import select
import socket
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from credence.streams.llm.openai_parsing import REPAIR_PREFIX, split_user_message
from credence.streams.llm.prompts import PROMPTS, candidate_rerank, stage2_classification
from credence.streams.llm.prompts.base import fit_to_schema, schema_name
from credence.streams.llm.token_budget import approx_tokens
from tests.support.openai_answers import (
    ANSWERS,
    UNKNOWN_ID,
    expected_id_enums,
    least_value,
    schema_problems,
)

FAILURE_KINDS = ("timeout", "http_500", "http_429", "bad_json", "schema_invalid", "unknown_id")


# -- the server ---------------------------------------------------------------------------------

def _prompt_by_prefix(system: Any) -> ModuleType | None:
    # Read at each request: a test may register a prompt of its own (tests/contract/test_a_new_task.py).
    return next((module for module in PROMPTS.values() if module.SYSTEM == system), None)


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
        refuse_repeats: bool = False,
        observation_cap: int = 200,
        prompt_cap: int = 15_000,
        count_tokens: Callable[[str], int] = approx_tokens,
        delay_tasks: Sequence[str] = (),
        delay_timeout_s: float = 60.0,
        delay_s: tuple[float, float] = (0.0, 0.0),
        overload_above: int = 0,
        down: bool = False,
        down_for: int = 0,
        extra_models: Sequence[str] = (),
        answers: Mapping[str, Callable[[Any], dict]] | None = None,
    ) -> None:
        assert set(failure_kinds) <= set(FAILURE_KINDS), failure_kinds
        self.model = model
        self.extra_models = frozenset(extra_models)  # served too: a platform's model tiers
        self.models_seen: Counter[tuple[str, str]] = Counter()  # (task, model) of every accepted request
        self.first_attempts: Counter[str] = Counter()  # per task, requests that are no retry (no "seed")
        self.failure_rate = failure_rate
        self.failure_kinds = tuple(failure_kinds)
        self.seed = seed
        self.stall_s = stall_s
        self.retry_after = retry_after
        self.hold_until_in_flight = hold_until_in_flight
        self.hold_timeout_s = hold_timeout_s
        self.refuse_repeats = refuse_repeats
        self._bodies: set[str] = set()
        self.observation_cap = observation_cap
        self.prompt_cap = prompt_cap
        self.count_tokens = count_tokens
        # Answers of these tasks (e.g. merge_decision.NAME) wait until release_delayed(): a slow model,
        # without a sleep in the test. Keep the client's timeout above delay_timeout_s.
        self.delay_tasks = frozenset(delay_tasks)
        self.delay_timeout_s = delay_timeout_s
        self._delay_released = threading.Event()
        self.delay_s = delay_s  # every answer is late by a seeded amount in this range: a slow server
        # A server with room for this many requests: one arriving beyond it is refused with 429 at once.
        self.overload_above = overload_above
        self.down = down  # while True every request is answered 503: a server that is down (set it live)
        self.down_for = down_for  # the first this many requests are answered 503: an outage, then healthy
        # Per prompt NAME, an answer other than the rules': a model deciding what the rules never would.
        self.answers = {**ANSWERS, **(answers or {})}
        self._requests = 0
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

    def release_delayed(self) -> None:
        """Let every delayed answer (held now or later) go out."""
        self._delay_released.set()

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

    def _is_down(self) -> bool:
        with self._state:
            self._requests += 1
            return self.down or self._requests <= self.down_for

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
        if body.get("model") != self.model and body.get("model") not in self.extra_models:
            raise _Refused(f"model {body.get('model')!r} is not served ({self.model!r}, {sorted(self.extra_models)})")
        messages = body.get("messages")
        if not (isinstance(messages, list) and len(messages) == 2
                and [m.get("role") for m in messages] == ["system", "user"]):
            raise _Refused("messages must be exactly [system, user]")
        module = _prompt_by_prefix(messages[0].get("content"))
        if module is None:
            raise _Refused("system message is not any task's static prefix")
        fmt = body.get("response_format")
        if not (isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("json_schema"), dict)
                and fmt["json_schema"].get("name") == schema_name(module.NAME, module.VERSION)
                and fmt["json_schema"].get("strict") is True):
            raise _Refused("response_format is not the task's strict json_schema")
        temperature = body.get("temperature")
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or not 0 < max_tokens <= module.MAX_TOKENS:
            raise _Refused(f"max_tokens {max_tokens!r} missing or above the cap {module.MAX_TOKENS}")
        try:
            hint, data = split_user_message(messages[1].get("content") or "")
        except ValueError as exc:
            raise _Refused(str(exc)) from exc
        if hint and not hint.startswith(REPAIR_PREFIX):
            raise _Refused("text before the input marker that is not a repair hint")
        if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 1:
            raise _Refused(f"temperature {temperature!r} outside [0, 1]")
        if hint and temperature == 0:
            raise _Refused("a retry at temperature 0")
        try:
            payload = module.Input.model_validate_json(data)
        except ValidationError as exc:
            raise _Refused(f"user message input does not validate: {exc}") from exc
        problems = schema_problems(fmt["json_schema"].get("schema"), expected_id_enums(module, payload))
        if problems:
            raise _Refused("; ".join(problems[:4]))
        if module in (stage2_classification, candidate_rerank):
            self._check_caps(module, messages[1]["content"], payload)
        with self._state:
            self.models_seen[(module.NAME, body["model"])] += 1
            self.first_attempts[module.NAME] += "seed" not in body
        return module, payload

    def _check_caps(self, module: ModuleType, user: str, payload: Any) -> None:
        total = self.count_tokens(module.SYSTEM) + self.count_tokens(user)
        if total > self.prompt_cap:
            raise _Refused(f"{module.NAME} prompt is {total} tokens, above the cap {self.prompt_cap}")
        for obs in payload.observations:
            if self.count_tokens(obs.text) > self.observation_cap:
                raise _Refused(f"observation {obs.id} above {self.observation_cap} tokens")

    def _repeated(self, raw: bytes) -> bool:
        digest = hashlib.sha256(raw).hexdigest()
        with self._state:
            seen = digest in self._bodies
            self._bodies.add(digest)
        return seen

    def _content(self, module: ModuleType, payload: BaseModel, schema: dict[str, Any], failure: str | None) -> str:
        # Held to the schema the request carried, as guided decoding holds a model: the rules logic may
        # say more than the wire allows, and the answer must still be one the client accepts.
        # A prompt with no answer of its own (a new one) gets the least its schema allows: no line per prompt.
        answer = self.answers.get(module.NAME)
        said = answer(payload) if answer is not None else least_value(schema)
        out = module.Output.model_validate(fit_to_schema(schema, said)).model_dump(mode="json")
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
                if server.refuse_repeats and server._repeated(raw):
                    raise _Refused("byte-identical to an earlier request: a retry must change something")
                module, payload = server._check(body)
            except (ValueError, TypeError, AttributeError, KeyError, _Refused) as exc:  # malformed: 400
                server._record(task, "violation", in_flight, str(exc))
                return self._send(400, {"error": {"message": str(exc)}})
            task = module.NAME
            if server._is_down():
                server._record(task, "http_503", in_flight)
                return self._send(503, {"error": {"message": "server down"}})
            if 0 < server.overload_above < in_flight:
                server._record(task, "http_429", in_flight)
                return self._send(429, {"error": {"message": "over capacity"}}, {"Retry-After": server.retry_after})
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
            if task in server.delay_tasks:
                server._delay_released.wait(server.delay_timeout_s)
            try:
                content = server._content(module, payload, body["response_format"]["json_schema"]["schema"], failure)
            except Exception as exc:  # noqa: BLE001 - a test double never dies on an input: it says why
                server._record(task, "violation", in_flight, f"the server could not answer: {exc!r}"[:500])
                return self._send(500, {"error": {"message": f"test server could not answer: {exc!r}"[:500]}})
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
