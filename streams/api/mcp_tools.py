"""The MCP tools: each one is a /v1 route with the tenant taken from the key. The arguments are pydantic
models (their JSON schema is the tool's input schema) and the result is the route's own response model (its
schema is the tool's output schema), so a tool validates and answers exactly as its route does."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from credence import api_models as models
from credence.errors import ApiError
from credence.records.envelope import ROLES
from credence.streams.api.http import path_parts
from credence.streams.api.reads import TIERS
from credence.streams.api.routes import ROUTES, Route
from credence.tables.scope import scope_key


class ScopeArgs(BaseModel):
    model_config = models.STRICT
    user: str = Field(min_length=1, max_length=200, description="the user's id in your platform")
    character: str = Field(min_length=1, max_length=200, description="the AI character's id")


WaitFor = Literal["applied", "extracted"]


class ReadArgs(ScopeArgs):
    wait: WaitFor | None = Field(default=None, description="with token: answer once this scope's memory has "
                                 "applied (or extracted facts from) the turns add_turns sent")
    token: str | None = Field(default=None, max_length=4000, description="the token add_turns answered")
    timeout: float | None = Field(default=None, gt=0, le=300, description="seconds the wait may take")


def _waiting(args) -> dict[str, str]:
    """The read's ?wait=&token=&timeout=."""
    return {k: str(v) for k in ("wait", "token", "timeout") if (v := getattr(args, k, None)) is not None}


class AddTurnsArgs(models.TurnsRequest):
    wait: WaitFor | None = Field(default=None, description="answer once each turn's scope has applied it (or "
                                 "extracted its facts); the answer's turns then say how far each got")
    timeout: float | None = Field(default=None, gt=0, le=300, description="seconds the wait may take")


class TurnArgs(ScopeArgs):
    turn_id: str = Field(min_length=1, max_length=200, description="a turn id sent with add_turns")
    wait: WaitFor | None = Field(default=None, description="answer once the turn got this far (bounded)")
    timeout: float | None = Field(default=None, gt=0, le=300, description="seconds the wait may take")


class RecallArgs(ReadArgs):
    query: str = Field(min_length=1, max_length=2000, description="what to look for in this scope's memory")
    top_k: int = Field(default=5, ge=1, le=100, description="at most this many hits")
    tag: str | None = Field(default=None, min_length=1, max_length=64, description="only memories with this tag")


class ListEntriesArgs(ReadArgs):
    tier: Literal[TIERS] | None = Field(default=None, description="only entries in this tier")
    tag: str | None = Field(default=None, min_length=1, max_length=64, description="only entries with this tag")


class EntryArgs(ScopeArgs):
    entry_id: str = Field(min_length=1, max_length=200, description="an entry id (from get_prompt, recall or "
                                                                    "list_entries)")


class FeedbackArgs(EntryArgs):
    kind: Literal["confirm", "deny"] = Field(description="confirm: the memory is right; deny: it is wrong")


class RecentArgs(ScopeArgs):
    max_tokens: int | None = Field(default=None, ge=1, le=100_000, description="token budget of the memo and "
                                                                              "the newest turns")


class DeleteArgs(EntryArgs):
    reason: str | None = Field(default=None, max_length=200, description="why the user wants it gone (journalled)")


class EditArgs(EntryArgs):
    text: str = Field(min_length=1, max_length=1000, description="the entry's new wording, as the user corrects it")


class RememberArgs(ScopeArgs):
    text: str = Field(min_length=1, max_length=1000, description="one self-contained statement about the user, "
                                                                 "e.g. 'The user is allergic to peanuts.'")
    importance: int = Field(default=5, ge=1, le=10, description="1..10, as the user weighs it")


@dataclass(frozen=True)
class Tool:
    name: str
    route: str  # the /v1 route's name
    description: str
    args: type[BaseModel]
    read_only: bool
    body: Callable[[BaseModel], BaseModel | None] = lambda args: None
    query: Callable[[BaseModel], dict[str, str]] = lambda args: {}

    @property
    def v1(self) -> Route:
        return next(r for r in ROUTES if r.name == self.route)


TOOLS: tuple[Tool, ...] = (
    Tool("add_turns", "post_turns", "Send conversation turns to memory. Each turn: user, character, turn_id, "
         f"role ({'|'.join(ROLES)}), text, ts (ISO-8601 with offset)[, surfaced_ids]; the tenant comes from your "
         "key. "
         "Each turn is validated on its own: the result lists rejected ones with the reason. Memory is built "
         "from them asynchronously by the stream; with wait, the answer comes once they are applied (or their "
         "facts extracted), and its token makes a later read wait for them.", AddTurnsArgs, False,
         body=lambda a: models.TurnsRequest(turns=a.turns), query=_waiting),
    Tool("get_prompt", "get_prompt", "The memory block to put in the character's prompt for this user: text, "
         "the entries it shows, token counts and what was left out.", ReadArgs, True, query=_waiting),
    Tool("recall", "post_recall", "Search this user's memory with this character (BM25, plus cosine when "
         "embeddings are on). Hits count as usage: they reinforce the recalled memories.", RecallArgs, False,
         body=lambda a: models.RecallRequest(query=a.query, top_k=a.top_k, tag=a.tag), query=_waiting),
    Tool("list_entries", "get_entries", "Every memory entry of this user with this character, with tier and "
         "score.", ListEntriesArgs, True,
         query=lambda a: ({"tier": a.tier} if a.tier else {}) | ({"tag": a.tag} if a.tag else {}) | _waiting(a)),
    Tool("get_entry", "get_entry", "One memory entry and the ordered signals (history) that made its score.",
         EntryArgs, True),
    Tool("give_feedback", "post_feedback", "Confirm or deny one memory entry, as the user said; the stream "
         "applies it in order.", FeedbackArgs, False,
         body=lambda a: models.FeedbackRequest(entry_id=a.entry_id, kind=a.kind)),
    Tool("get_recent", "get_recent", "The recent conversation with this user: a rolling memo of older turns and "
         "the newest turns, within max_tokens, beside the memory block (as get_prompt).", RecentArgs, True,
         query=lambda a: {"max_tokens": str(a.max_tokens)} if a.max_tokens else {}),
    Tool("delete_entry", "delete_entry", "Delete one memory entry as the user asked: it leaves every store "
         "(tables, changelogs, recall index, Parquet archive) and is not brought back by what was said before; "
         "answers an erasure receipt, store by store.", DeleteArgs, False,
         query=lambda a: {"by": "user"} | ({"reason": a.reason} if a.reason else {})),
    Tool("remember", "post_entries", "Remember this about the user, on their behalf: a user statement that goes "
         "through the same evidence rules as anything they say (a new memory starts pending).", RememberArgs,
         False, body=lambda a: models.RememberRequest(text=a.text, importance=a.importance)),
    Tool("edit_entry", "put_entry_text", "Reword one memory entry as the user corrects it: it keeps its evidence, "
         "and the old wording is kept in its version history.", EditArgs, False,
         body=lambda a: models.EditTextRequest(text=a.text)),
    Tool("turn_status", "get_turn", "How far one turn sent with add_turns has come: accepted, applied, or "
         "extracted (with the memory entries its facts touched).", TurnArgs, True, query=_waiting),
)
BY_NAME = {t.name: t for t in TOOLS}


def parse_args(tool: Tool, arguments: dict | None) -> BaseModel:
    """The tool's arguments, or ApiError 422 naming every field that is wrong (as the route's body check)."""
    try:
        return tool.args.model_validate(arguments or {})
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
        raise ApiError(422, f"invalid arguments for {tool.name}: {reasons}") from None


async def run(api, caller, authorization: str, name: str, arguments: dict | None) -> dict:
    """What the tool's /v1 route answers for `caller`, as JSON; ApiError when the route refuses. A scope's
    reads and writes are answered by its owner, through the same forwarding as /v1."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise ApiError(404, f"no tool {name!r}; the tools are {', '.join(BY_NAME)}")
    args = parse_args(tool, arguments)
    route = tool.v1
    params = path_parts({"tenant": caller.name, **{k: getattr(args, k) for k in ("user", "character", "entry_id", "turn_id")
                                                   if "{" + k + "}" in route.path}})
    body, query = tool.body(args), tool.query(args)
    if route.by_owner:
        raw = body.model_dump_json(exclude_none=True).encode() if body is not None else None
        scope = scope_key(params["tenant"], params["user"], params["character"])
        owned = await api.router.ask(scope, route.method, route.path.format(**params), query, authorization, raw)
        if owned is not None:
            return _owner_answer(*owned)
    status, result = await api.answer(route, caller, params, body, query, authorization)
    return result.model_dump(mode="json")


def _owner_answer(status: int, payload: bytes) -> dict:
    try:
        answer = json.loads(payload)
    except ValueError:
        raise ApiError(502, f"the scope's owner answered {status} with a body that is not JSON") from None
    if status >= 400:
        raise ApiError(status, answer.get("error", "refused") if isinstance(answer, dict) else "refused")
    return answer


def output_schema(tool: Tool) -> dict:
    return tool.v1.response.model_json_schema(mode="serialization")


def input_schema(tool: Tool) -> dict:
    return tool.args.model_json_schema()
