"""Typed Python client of credence's HTTP API /v1 (sync `Client`, async `AsyncClient`).

    from credence.client import Client
    with Client("http://127.0.0.1:6066", key="cred_…", tenant="acme") as api:
        block = api.prompt("alice", "barista").text

A refused request raises `ApiError` with the HTTP status and the server's reason (and `retry_after` for
429/503). Responses are the server's own pydantic models (credence.api_models).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from credence import api_models as models
from credence.errors import ApiError
from credence.tables.clock import format_instant

__all__ = ["ApiError", "AsyncClient", "Client", "models"]


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    model: type | None
    body: dict | None = None
    params: dict | None = None


def _q(part: str) -> str:
    return quote(part, safe="")


def _iso(value: datetime | None) -> str | None:
    return format_instant(value)


def _clean(params: dict) -> dict:
    return {k: v for k, v in params.items() if v is not None}


def _after(token: str | None, wait: str, timeout: float | None) -> dict:
    """A read's `?wait=&token=&timeout=`: answer once the scope's owner reached the turns of `token` (the
    `token` of a `send_turns` answer)."""
    return _clean({"wait": wait, "token": token, "timeout": timeout}) if token is not None else {}


class _Routes:
    """Every route as a _Call; the sync and async clients only differ in how they send it."""

    def __init__(self, tenant: str) -> None:
        self.t = f"/v1/tenants/{_q(tenant)}"

    def scope(self, user: str, character: str) -> str:
        return f"{self.t}/users/{_q(user)}/characters/{_q(character)}"

    def turns(self, turns: Iterable[dict], wait=None, timeout=None) -> _Call:
        return _Call("POST", f"{self.t}/turns", models.TurnsResponse, {"turns": list(turns)},
                     _clean({"wait": wait, "timeout": timeout if wait else None}))

    def turn(self, user, character, turn_id, wait=None, timeout=None, token=None) -> _Call:
        return _Call("GET", f"{self.scope(user, character)}/turns/{_q(turn_id)}", models.TurnStatus, None,
                     _clean({"wait": wait, "timeout": timeout if wait else None, "token": token}))

    def prompt(self, user, character, at=None, after=None, wait="applied", timeout=None) -> _Call:
        return _Call("GET", f"{self.scope(user, character)}/prompt", models.PromptResponse, None,
                     _clean({"at": _iso(at)}) | _after(after, wait, timeout))

    def recall(self, user, character, query, top_k=10, since=None, until=None, after=None, wait="applied",
               timeout=None, tag=None) -> _Call:
        body = _clean({"query": query, "top_k": top_k, "since": _iso(since), "until": _iso(until), "tag": tag})
        return _Call("POST", f"{self.scope(user, character)}/recall", models.RecallResponse, body,
                     _after(after, wait, timeout) or None)

    def feedback(self, user, character, entry_id, kind, wait=False, ts=None) -> _Call:
        body = _clean({"entry_id": entry_id, "kind": kind, "ts": _iso(ts)})
        return _Call("POST", f"{self.scope(user, character)}/feedback", models.FeedbackResponse, body,
                     {"wait": "true"} if wait else None)

    def entries(self, user, character, tier=None, kind=None, at=None, after=None, wait="applied",
                timeout=None, tag=None) -> _Call:
        return _Call("GET", f"{self.scope(user, character)}/entries", models.EntriesResponse, None,
                     _clean({"tier": tier, "kind": kind, "at": _iso(at), "tag": tag}) | _after(after, wait, timeout))

    def entry(self, user, character, entry_id, at=None) -> _Call:
        return _Call("GET", f"{self.scope(user, character)}/entries/{_q(entry_id)}", models.EntryDetail, None,
                     _clean({"at": _iso(at)}))

    def delete_entry(self, user, character, entry_id, by=None, reason=None) -> _Call:
        return _Call("DELETE", f"{self.scope(user, character)}/entries/{_q(entry_id)}", models.ErasureReceipt,
                     params=_clean({"by": by, "reason": reason}))

    def remember(self, user, character, text, importance=5, subject=None, by=None) -> _Call:
        body = _clean({"text": text, "importance": importance, "subject": subject, "by": by})
        return _Call("POST", f"{self.scope(user, character)}/entries", models.RememberResponse, body)

    def edit_text(self, user, character, entry_id, text, by=None) -> _Call:
        return _Call("PUT", f"{self.scope(user, character)}/entries/{_q(entry_id)}/text", models.EditTextResponse,
                     _clean({"text": text, "by": by}))

    def put_card(self, character, entries) -> _Call:
        items = [e.model_dump() if isinstance(e, BaseModel) else dict(e) for e in entries]
        return _Call("PUT", f"{self.t}/characters/{_q(character)}/card", models.CardResponse, {"entries": items})

    def forget_user(self, user) -> _Call:
        return _Call("DELETE", f"{self.t}/users/{_q(user)}", models.ForgetResponse)

    def recent(self, user, character, max_tokens=None) -> _Call:
        return _Call("GET", f"{self.scope(user, character)}/recent", models.RecentResponse, None,
                     _clean({"max_tokens": str(max_tokens) if max_tokens is not None else None}))

    def openapi(self) -> _Call:
        return _Call("GET", "/v1/openapi.json", None)

    def status(self) -> _Call:
        return _Call("GET", "/status", None)


def _result(call: _Call, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        try:
            reason = response.json().get("error", response.text)
        except ValueError:
            reason = response.text
        retry = response.headers.get("Retry-After")
        raise ApiError(response.status_code, f"{call.method} {call.path}: {response.status_code} {reason}",
                       {"Retry-After": retry} if retry else None)
    data = response.json()
    return call.model.model_validate(data) if call.model is not None else data


def _headers(key: str | None) -> dict:
    return {"Authorization": f"Bearer {key}"} if key else {}


class Client:
    def __init__(self, base_url: str, key: str | None, tenant: str, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.routes = _Routes(tenant)
        self._http = httpx.Client(base_url=base_url, headers=_headers(key), timeout=timeout, transport=transport)

    def _send(self, call: _Call):
        return _result(call, self._http.request(call.method, call.path, json=call.body, params=call.params))

    def send_turns(self, turns: Iterable[dict], wait: str | None = None,
                   timeout: float | None = None) -> models.TurnsResponse:
        """POST …/turns: accepted count, rejected turns by index with the reason, each turn's position and
        the consistency `token` (pass it as `after=` to a read); `wait`: applied | extracted (bounded)."""
        return self._send(self.routes.turns(turns, wait, timeout))

    def turn(self, user: str, character: str, turn_id: str, wait: str | None = None, timeout: float | None = None,
             token: str | None = None) -> models.TurnStatus:
        """GET …/turns/{turn_id}: accepted | applied | extracted (with the entries its facts touched)."""
        return self._send(self.routes.turn(user, character, turn_id, wait, timeout, token))

    def prompt(self, user: str, character: str, at: datetime | None = None, *, after: str | None = None,
               wait: str = "applied", timeout: float | None = None) -> models.PromptResponse:
        """`after`: a `send_turns` token; the read then waits (bounded) until its turns are `wait`."""
        return self._send(self.routes.prompt(user, character, at, after, wait, timeout))

    def recall(self, user: str, character: str, query: str, top_k: int = 10, since: datetime | None = None,
               until: datetime | None = None, *, after: str | None = None, wait: str = "applied",
               timeout: float | None = None, tag: str | None = None) -> models.RecallResponse:
        return self._send(self.routes.recall(user, character, query, top_k, since, until, after, wait, timeout,
                                             tag))

    def feedback(self, user: str, character: str, entry_id: str, kind: str, wait: bool = False,
                 ts: datetime | None = None) -> models.FeedbackResponse:
        """kind: confirm | deny; with `wait`, returns once applied (or the server's bound passed)."""
        return self._send(self.routes.feedback(user, character, entry_id, kind, wait, ts))

    def entries(self, user: str, character: str, tier: str | None = None, kind: str | None = None,
                at: datetime | None = None, *, after: str | None = None, wait: str = "applied",
                timeout: float | None = None, tag: str | None = None) -> models.EntriesResponse:
        """`tag`: only entries carrying it."""
        return self._send(self.routes.entries(user, character, tier, kind, at, after, wait, timeout, tag))

    def entry(self, user: str, character: str, entry_id: str, at: datetime | None = None) -> models.EntryDetail:
        return self._send(self.routes.entry(user, character, entry_id, at))

    def delete_entry(self, user: str, character: str, entry_id: str, by: str | None = None,
                     reason: str | None = None) -> models.ErasureReceipt:
        """Delete one entry everywhere; the erasure receipt says what was removed in each store."""
        return self._send(self.routes.delete_entry(user, character, entry_id, by, reason))

    def remember(self, user: str, character: str, text: str, importance: int = 5, subject: str | None = None,
                 by: str | None = None) -> models.RememberResponse:
        """Remember this: a user statement entered as a user fact (the evidence rules decide what it becomes)."""
        return self._send(self.routes.remember(user, character, text, importance, subject, by))

    def edit_text(self, user: str, character: str, entry_id: str, text: str,
                  by: str | None = None) -> models.EditTextResponse:
        """Reword one entry as the user corrects it; the old wording stays in its version history."""
        return self._send(self.routes.edit_text(user, character, entry_id, text, by))

    def put_card(self, character: str, entries: Iterable[dict | models.CardEntryIn]) -> models.CardResponse:
        return self._send(self.routes.put_card(character, entries))

    def forget_user(self, user: str) -> models.ForgetResponse:
        return self._send(self.routes.forget_user(user))

    def recent(self, user: str, character: str, max_tokens: int | None = None) -> models.RecentResponse:
        """The rolling memo and the newest turns within max_tokens, beside the memory block."""
        return self._send(self.routes.recent(user, character, max_tokens))

    def openapi(self) -> dict:
        return self._send(self.routes.openapi())

    def status(self) -> dict:
        return self._send(self.routes.status())

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncClient:
    def __init__(self, base_url: str, key: str | None, tenant: str, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.routes = _Routes(tenant)
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(key), timeout=timeout,
                                       transport=transport)

    async def _send(self, call: _Call):
        return _result(call, await self._http.request(call.method, call.path, json=call.body, params=call.params))

    async def send_turns(self, turns: Iterable[dict], wait: str | None = None,
                         timeout: float | None = None) -> models.TurnsResponse:
        return await self._send(self.routes.turns(turns, wait, timeout))

    async def turn(self, user: str, character: str, turn_id: str, wait: str | None = None,
                   timeout: float | None = None, token: str | None = None) -> models.TurnStatus:
        return await self._send(self.routes.turn(user, character, turn_id, wait, timeout, token))

    async def prompt(self, user: str, character: str, at: datetime | None = None, *, after: str | None = None,
                     wait: str = "applied", timeout: float | None = None) -> models.PromptResponse:
        return await self._send(self.routes.prompt(user, character, at, after, wait, timeout))

    async def recall(self, user: str, character: str, query: str, top_k: int = 10, since: datetime | None = None,
                     until: datetime | None = None, *, after: str | None = None, wait: str = "applied",
                     timeout: float | None = None, tag: str | None = None) -> models.RecallResponse:
        return await self._send(self.routes.recall(user, character, query, top_k, since, until, after, wait,
                                                   timeout, tag))

    async def feedback(self, user: str, character: str, entry_id: str, kind: str, wait: bool = False,
                       ts: datetime | None = None) -> models.FeedbackResponse:
        return await self._send(self.routes.feedback(user, character, entry_id, kind, wait, ts))

    async def entries(self, user: str, character: str, tier: str | None = None, kind: str | None = None,
                      at: datetime | None = None, *, after: str | None = None, wait: str = "applied",
                      timeout: float | None = None, tag: str | None = None) -> models.EntriesResponse:
        return await self._send(self.routes.entries(user, character, tier, kind, at, after, wait, timeout, tag))

    async def entry(self, user: str, character: str, entry_id: str,
                    at: datetime | None = None) -> models.EntryDetail:
        return await self._send(self.routes.entry(user, character, entry_id, at))

    async def delete_entry(self, user: str, character: str, entry_id: str, by: str | None = None,
                           reason: str | None = None) -> models.ErasureReceipt:
        return await self._send(self.routes.delete_entry(user, character, entry_id, by, reason))

    async def remember(self, user: str, character: str, text: str, importance: int = 5, subject: str | None = None,
                       by: str | None = None) -> models.RememberResponse:
        return await self._send(self.routes.remember(user, character, text, importance, subject, by))

    async def edit_text(self, user: str, character: str, entry_id: str, text: str,
                        by: str | None = None) -> models.EditTextResponse:
        return await self._send(self.routes.edit_text(user, character, entry_id, text, by))

    async def put_card(self, character: str, entries: Iterable[dict | models.CardEntryIn]) -> models.CardResponse:
        return await self._send(self.routes.put_card(character, entries))

    async def forget_user(self, user: str) -> models.ForgetResponse:
        return await self._send(self.routes.forget_user(user))

    async def recent(self, user: str, character: str, max_tokens: int | None = None) -> models.RecentResponse:
        return await self._send(self.routes.recent(user, character, max_tokens))

    async def openapi(self) -> dict:
        return await self._send(self.routes.openapi())

    async def status(self) -> dict:
        return await self._send(self.routes.status())

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
