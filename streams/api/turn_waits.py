"""Turn status and bounded waits: `GET …/turns/{turn_id}`, `POST …/turns?wait=` and the reads'
`?wait=&token=`. Every wait polls this worker's own store (memory, no Kafka) until the scope's owner — this
worker, or the owner a scope's wait is forwarded to — has come far enough, or the timeout passes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from credence import api_models as models
from credence.errors import ApiError
from credence.records.topics import TOPICS
from credence.streams.api import consistency
from credence.streams.scope.turn_status import ACCEPTED, APPLIED, at_least, reached, turn_state
from credence.streams.state.positions import durable_next
from credence.tables.scope import Scope

POLL_S = 0.05
MAX_WAIT_SCOPES = 100  # scopes one POST …/turns?wait= may wait on (each may be another worker's)


def _max_wait(handlers) -> float:
    return handlers.credence.settings.api.turn_wait_max_seconds


async def until(test: Callable[[], object], timeout: float):
    """The first truthy `test()` within `timeout` seconds, else the last (falsy) answer."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        answer = test()
        if answer or loop.time() >= end:
            return answer
        await asyncio.sleep(POLL_S)


async def before_read(handlers, call) -> None:
    """A read with `?wait=…&token=`: return once the scope's owner (this worker) reached the token on the
    scope's partition; 503 with Retry-After when it did not within the timeout."""
    wait = consistency.wait_of(call.query, _max_wait(handlers), token_needed=True)
    if wait is None:
        return
    scope = call.scope.key
    partition = handlers.credence.ownership.partition_of(scope)
    offset = wait.token.get(partition)
    if offset is None:
        return  # the token's turns were all written to other scopes' partitions: nothing to wait for here
    if not await until(lambda: _reached(handlers, scope, partition, offset, wait.wait), wait.timeout):
        raise ApiError(503, f"the scope's owner has not {wait.wait} the token's turns within {wait.timeout:g} s; "
                            "retry (the token stays valid)", {"Retry-After": "1"})


def _reached(handlers, scope: str, partition: int, offset: int, wait: str) -> bool:
    """The token's partition position is compared, not the scope's own: other scopes' turns on the same
    partition raise the token's offset past anything this scope applies."""
    settings = handlers.credence.settings
    past = durable_next(handlers.credence.state_tables.seen, settings.topic(TOPICS.turns), partition)
    return reached(handlers.store.control(scope), partition, offset, wait, past)


def status(handlers, scope: Scope, turn_id: str) -> models.TurnStatus | None:
    """The turn's state in its scope, or None when the scope keeps no mark of it (not applied yet, refused,
    forgotten, or older than the duplicate-mark horizon)."""
    position = handlers.credence.marks.position_of(TOPICS.turns.name, scope.key, turn_id)
    state = handlers.store.control(scope.key) if position is not None else None
    if state is None:
        return None
    partition, offset = position
    now = turn_state(state, turn_id, partition, offset)
    return models.TurnStatus(turn_id=turn_id, state=now, partition=partition, offset=offset,
                             entry_ids=list(state.turn_entries.get(turn_id, [])) if now != ACCEPTED else [])


async def get_turn(handlers, call):
    wait = consistency.wait_of(call.query, _max_wait(handlers), token_needed=False)
    scope, turn_id = call.scope, call.params["turn_id"]
    if wait is None:
        found = status(handlers, scope, turn_id)
    else:
        found = await until(lambda: _at(status(handlers, scope, turn_id), wait.wait), wait.timeout) \
            or status(handlers, scope, turn_id)
    if found is None:
        found = _unseen(handlers, call, scope, turn_id)
    if wait is not None:
        found.reached = at_least(found.state, wait.wait)
    return 200, found


def _at(found: models.TurnStatus | None, wait: str) -> models.TurnStatus | None:
    return found if found is not None and at_least(found.state, wait) else None


def _unseen(handlers, call, scope: Scope, turn_id: str) -> models.TurnStatus:
    """No mark of the turn: `accepted` while the owner is still short of the POST's token, else 404."""
    token = call.query.get("token")
    if token is not None:
        partition = handlers.credence.ownership.partition_of(scope.key)
        offset = consistency.decode(token).get(partition)
        if offset is not None and not _reached(handlers, scope.key, partition, offset, APPLIED):
            return models.TurnStatus(turn_id=turn_id, state=ACCEPTED, partition=partition, offset=offset)
        raise ApiError(404, f"turn {turn_id!r} is not in this scope: its owner passed the token without applying "
                            "it (refused to the dead-letter topic, forgotten, or another user/character)")
    raise ApiError(404, f"no recent turn {turn_id!r} in this scope: not applied yet (pass ?token= from POST …/turns "
                        "to tell), or unknown")


def wait_scopes(turns: list, limit: int = MAX_WAIT_SCOPES) -> None:
    """Refuse (before anything is produced) a waiting POST over more scopes than one request waits on."""
    scopes = {t.scope for t in turns}
    if len(scopes) > limit:
        raise ApiError(422, f"wait covers at most {limit} scopes per request, these turns name {len(scopes)}; "
                            "send them without wait and read with ?wait=&token=")


async def wait_turns(handlers, call, wait: consistency.Wait, turns: list[models.TurnPosition]) -> bool:
    """Wait on each scope's last turn (a scope's turns are applied in order); set each turn's state."""
    last: dict[tuple[str, str], models.TurnPosition] = {}
    for turn in turns:
        last[(turn.user, turn.character)] = turn
    states = await asyncio.gather(*(_scope_wait(handlers, call, wait, t) for t in last.values()))
    got = dict(zip(last, states, strict=True))
    for turn in turns:
        turn.state = got[(turn.user, turn.character)]
    return all(at_least(s, wait.wait) for s in states)


async def _scope_wait(handlers, call, wait: consistency.Wait, turn: models.TurnPosition) -> str:
    scope = Scope(call.tenant.name, turn.user, turn.character)
    path = f"/v1/tenants/{scope.tenant}/users/{scope.user}/characters/{scope.character}/turns/{turn.turn_id}"
    loop = asyncio.get_running_loop()
    end = loop.time() + wait.timeout
    while True:
        left = end - loop.time()
        query = {"wait": wait.wait, "timeout": f"{max(left, POLL_S):g}", "token": f"{turn.partition}:{turn.offset}"}
        try:
            owned = await handlers.router.ask(scope.key, "GET", path, query, call.authorization, None)
        except ApiError:  # the scope is moving between workers: ask again until the wait's time is up
            if left <= 0:
                return ACCEPTED
            await asyncio.sleep(min(POLL_S * 4, max(left, 0)))
            continue
        break
    if owned is not None:
        code, payload = owned
        return json.loads(payload).get("state", ACCEPTED) if code == 200 else ACCEPTED
    found = await until(lambda: _at(status(handlers, scope, turn.turn_id), wait.wait), max(end - loop.time(), 0))
    return found.state if found is not None else (getattr(status(handlers, scope, turn.turn_id), "state", ACCEPTED))
