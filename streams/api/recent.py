"""GET …/recent: the scope's recent conversation (tables/recent.py) within a token budget, beside the memory
block. The block is the one GET …/prompt serves (its cache, and its usage record: entries rendered here are
in use as much as there), so a platform builds a character's prompt from one call."""

from __future__ import annotations

from dataclasses import replace

from credence import api_models as models
from credence.errors import ApiError
from credence.tables.recent import RecentLog, render

MAX_TOKENS_LIMIT = 100_000


def max_tokens(query, default: int) -> int:
    raw = query.get("max_tokens")
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"max_tokens must be an integer, got {raw[:20]!r}") from None
    if not 1 <= value <= MAX_TOKENS_LIMIT:
        raise ApiError(400, f"max_tokens must be within 1..{MAX_TOKENS_LIMIT}, got {value}")
    return value


async def recent(handlers, call) -> tuple[int, models.RecentResponse]:
    budget = max_tokens(call.query, handlers.tenant_memory(call).recent_render_max_tokens)
    # the prompt route's own answer (read at the scope's clock; a use of what it renders, counted there)
    _, block = await handlers.get_prompt(replace(call, body=None, query={}))
    state = handlers.store.get(call.scope.key)
    log = state.recent if state is not None else RecentLog()
    view = render(log, budget, handlers.count_tokens)
    return 200, models.RecentResponse(
        memo=view.memo, memo_turns=log.memo_turns,
        turns=[models.RecentTurn(**t.to_dict()) for t in view.turns], left_out_turns=view.left_out_turns,
        tokens=view.tokens, max_tokens=budget, memory=block, clock=state.clock if state is not None else None)
