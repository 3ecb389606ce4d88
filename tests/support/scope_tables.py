"""Scope state over plain mappings: the store's only contract with a Faust table is the mapping
interface (get, set, delete, keys, items), which the worker's tables provide; the integration tests run
the same code over the real tables and changelogs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.config.state import StateSettings
from credence.streams.scope.context import StepContext
from credence.streams.state.ownership import Ownership
from credence.streams.state.store import ScopeStore, StateTables
from credence.streams.state.writes import TableWrites

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SCOPE = "acme/u1/aria"
PIPELINE = PipelineSettings(stage1_max_batch=1)


def turn(n: int, text: str, at: datetime = T0, scope: str = SCOPE) -> dict:
    tenant, user, character = scope.split("/")
    return {"v": 1, "tenant": tenant, "user": user, "character": character, "turn_id": f"t{n}",
            "role": "user", "text": text, "ts": at.isoformat()}


def make_context(scope: str, now: datetime, powerful: bool) -> StepContext:
    return StepContext(now=now, powerful=powerful, boot="boot-1", memory=MemorySettings(), pipeline=PIPELINE)


def new_tables() -> StateTables:
    return StateTables(scopes={}, entries={}, lists={}, history={}, seen={})


@pytest.fixture
def tables() -> StateTables:
    return new_tables()


@pytest.fixture
def ownership() -> Ownership:
    return Ownership(4, "credence.turns")


def store_over(tables: StateTables, ownership: Ownership, **settings) -> ScopeStore:
    return ScopeStore(tables, StateSettings(**settings), ownership.partition_of, TableWrites())
