"""Factories for archive and evidence records in the v1 formats of docs/records.md."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from credence.config.archive import ArchiveSettings
from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.streams.scope.context import StepContext
from credence.streams.scope.scope_state import Request, ScopeState


def make_entry(tenant="acme", user="u1", character="c1", entry_id="e1", kind="reflection", **overrides) -> dict:
    entry = {
        "id": entry_id, "kind": kind, "tenant": tenant, "user": user, "character": character,
        "text": "prefers tea to coffee", "subject": "drinks", "importance": 7,
        "source_fact_ids": ["f1", "f2"], "protected": False, "status": "pending",
        "evidence": {
            "reinforcement": 0.2, "disputation": 3.0,
            "rein_last_signal_at": "2026-01-02T03:04:05.123456Z", "disp_last_signal_at": None,
            "sub_zero_days": 14, "sub_zero_last_increment_date": "2026-01-20",
            "user_fact_reinforce_count": 1,
        },
        "created_at": "2026-01-01T00:00:00Z", "confirmed_at": None, "promoted_at": None,
        "merged_from_ids": [], "merged_into_id": None, "promote_attempts": 0,
        "last_promote_attempt_at": None, "recent_mentions": ["2026-01-03T00:00:00Z"],
        "suppressed_at": None, "version": 9, "updated_at": "2026-01-21T10:00:00Z",
        "archived_at": "2026-01-21T10:00:00Z",
    }
    entry.update(overrides)
    return entry


def make_archive_record(tenant="acme", user="u1", character="c1", entry_id="e1", kind="reflection",
                        archived_at="2026-01-21T10:00:00Z", **entry_overrides) -> dict:
    return {
        "v": 1, "tenant": tenant, "user": user, "character": character, "entry_id": entry_id,
        "entry_kind": kind, "archived_at": archived_at, "reason": "sweep",
        "entry": make_entry(tenant, user, character, entry_id, kind, **entry_overrides),
    }


def make_evidence_record(event="signal", at="2026-01-21T10:00:00Z", tenant="acme", user="u1", character="c1",
                         entry_id="e1", kind="reflection", version=1, cause=None, from_status=None,
                         to_status=None) -> dict:
    return {
        "v": 1, "event_id": f"{entry_id}@{version}", "tenant": tenant, "user": user, "character": character,
        "entry_id": entry_id, "entry_kind": kind, "event": event, "cause": cause,
        "from_status": from_status, "to_status": to_status, "at": at, "score": 0.5, "tier": "pending",
        "entry": make_entry(tenant, user, character, entry_id, kind, version=version),
    }


@pytest.fixture
def archive_record_factory():
    return make_archive_record


@pytest.fixture
def evidence_record_factory():
    return make_evidence_record


@pytest.fixture
def archive_settings_factory(tmp_path):
    def factory(**overrides) -> ArchiveSettings:
        return ArchiveSettings(**{"root": str(tmp_path / "archive"), **overrides})
    return factory


def make_facts_event(event="facts_failed", cause="max_request_failures", fact_ids=("f1", "f2"),
                     at=datetime(2026, 1, 21, 10, tzinfo=UTC), tenant="acme", request_id="stage2-1",
                     task="stage2") -> dict:
    """A facts event exactly as a scope step journals it (docs/records.md, "Facts events")."""
    ctx = StepContext(now=at, powerful=True, boot="b", memory=MemorySettings(), pipeline=PipelineSettings())
    req = Request(id=request_id, task=task, payload={}, issued_at=at, boot="b")
    ctx.journal_facts(ScopeState(scope=f"{tenant}/u1/c1"), req, event, cause, list(fact_ids), f"{task} went wrong")
    (emit,) = ctx.emits
    return json.loads(json.dumps(emit.record))  # as the sink decodes it from the topic


@pytest.fixture
def facts_event_factory():
    return make_facts_event
