from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest

from credence.errors import DomainError
from credence.tables.entries import (
    ENTRY_KEYS,
    Entry,
    apply_snapshot,
    changed,
    new_persona_entry,
    new_reflection,
    record_signal,
)
from credence.tables.evidence import Evidence
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")

# docs/records.md, "Entry.to_dict() keys", in its order.
RECORDS_MD_KEYS = [
    "id", "kind", "tenant", "user", "character", "text", "subject", "importance", "source_fact_ids",
    "protected", "status", "evidence", "created_at", "confirmed_at", "promoted_at", "merged_from_ids",
    "merged_into_id", "promote_attempts", "last_promote_attempt_at", "recent_mentions", "suppressed_at",
    "version", "updated_at", "archived_at", "promotion_rejected_at", "valid_from", "invalidated_at", "usage",
    "consensus", "tags",
]  # fmt: skip
EVIDENCE_KEYS = [
    "reinforcement", "disputation", "rein_last_signal_at", "disp_last_signal_at", "sub_zero_days",
    "sub_zero_last_increment_date", "user_fact_reinforce_count",
]  # fmt: skip


def full_entry() -> Entry:
    return Entry(
        id="r7", kind="reflection", tenant="acme", user="u1", character="aria", text="prefers tea",
        created_at=T0, status="confirmed", subject="drinks", importance=8, source_fact_ids=("f1", "f2"),
        evidence=Evidence(1.5, 0.5, T0, T0, 2, date(2026, 3, 1), 3), confirmed_at=T0 + timedelta(days=1),
        merged_from_ids=("x",), promote_attempts=2, last_promote_attempt_at=T0 + timedelta(days=2),
        recent_mentions=(T0, T0 + timedelta(hours=1)), suppressed_at=T0 + timedelta(hours=1), version=9,
        updated_at=T0 + timedelta(days=2),
    )  # fmt: skip


def test_to_dict_has_exactly_the_records_md_keys():
    d = full_entry().to_dict()
    assert list(d) == RECORDS_MD_KEYS == list(ENTRY_KEYS)
    assert list(d["evidence"]) == EVIDENCE_KEYS


def test_to_dict_values_are_json_ready():
    d = full_entry().to_dict()
    assert d["created_at"] == "2026-03-01T12:00:00+00:00"
    assert d["recent_mentions"] == ["2026-03-01T12:00:00+00:00", "2026-03-01T13:00:00+00:00"]
    assert d["source_fact_ids"] == ["f1", "f2"] and d["merged_from_ids"] == ["x"]
    assert d["promoted_at"] is None and d["archived_at"] is None and d["merged_into_id"] is None
    assert d["importance"] == 8 and d["version"] == 9 and d["protected"] is False


def test_round_trip():
    entry = full_entry()
    assert Entry.from_dict(entry.to_dict()) == entry


def test_scope_property_is_the_topic_key():
    assert full_entry().scope == "acme/u1/aria"


def test_from_dict_defaults_optional_fields_and_reads_naive_as_utc():
    entry = Entry.from_dict(
        {"id": "p1", "kind": "persona", "tenant": "acme", "user": "u1", "character": "aria", "text": "t",
         "status": "active", "created_at": "2026-03-01T12:00:00"}
    )  # fmt: skip
    assert entry.created_at == T0 and entry.version == 1 and entry.evidence == Evidence()
    assert entry.recent_mentions == () and entry.importance == 5


def test_from_dict_drops_unparseable_mentions_and_timestamps():
    d = full_entry().to_dict() | {"recent_mentions": ["nope", "2026-03-01T12:00:00Z"], "confirmed_at": "?"}
    entry = Entry.from_dict(d)
    assert entry.recent_mentions == (T0,) and entry.confirmed_at is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "memo"}, "kind"),
        ({"status": "active"}, "reflection status"),
        ({"importance": 11}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"tenant": "a/b"}, "tenant"),
        ({"user": ""}, "user"),
        ({"created_at": "soon"}, "created_at"),
        ({"id": None}, "id"),
        ({"version": 0}, "version"),
    ],
)
def test_from_dict_rejects_invalid_snapshots(change, message):
    with pytest.raises(DomainError, match=message):
        Entry.from_dict(full_entry().to_dict() | change)


def test_persona_statuses_are_active_and_archived_only():
    with pytest.raises(DomainError, match="persona status"):
        Entry.from_dict(full_entry().to_dict() | {"kind": "persona", "status": "pending"})


def test_changed_bumps_version_and_updated_at():
    entry = full_entry()
    later = T0 + timedelta(days=5)
    after = changed(entry, later, text="prefers green tea")
    assert after.version == entry.version + 1 and after.updated_at == later and after.text == "prefers green tea"
    assert entry.text == "prefers tea"  # immutable input


def test_apply_snapshot_newer_wins_older_and_equal_are_ignored():
    current = full_entry()
    newer = replace(current, version=10, text="newer")
    older = replace(current, version=8, text="older")
    assert apply_snapshot(current, newer) is newer
    assert apply_snapshot(current, older) is current
    assert apply_snapshot(current, replace(current, text="dup")) is current
    assert apply_snapshot(None, older) is older


def test_new_reflection_is_pending_and_seeded_by_source_importance():
    entry = new_reflection("r1", SCOPE, "likes tea", T0, importance=6, source_fact_importances=[10, 4])
    assert entry.status == "pending" and entry.version == 1 and entry.updated_at == T0
    assert entry.evidence == Evidence(reinforcement=0.8, rein_last_signal_at=T0)
    assert new_reflection("r2", SCOPE, "x", T0).evidence == Evidence()


def test_new_persona_entry_is_active():
    entry = new_persona_entry("p1", SCOPE, "a pirate", T0, protected=True)
    assert entry.kind == "persona" and entry.status == "active" and entry.protected
    assert entry.score(T0) == float("inf")


def test_record_signal_updates_evidence_and_version():
    entry = new_reflection("r1", SCOPE, "likes tea", T0)
    after = record_signal(entry, "user_confirm", T0 + timedelta(hours=1))
    assert after.evidence.reinforcement == 1.0 and after.version == 2


def test_record_signal_leaves_protected_entries_alone():
    entry = new_persona_entry("p1", SCOPE, "a pirate", T0, protected=True)
    assert record_signal(entry, "user_deny", T0) is entry


def test_scope_key_and_parse():
    assert SCOPE.key == "acme/u1/aria" == str(SCOPE)
    assert Scope.parse("acme/u1/aria") == SCOPE


@pytest.mark.parametrize("key", ["acme/u1", "acme/u1/aria/x", "/u1/aria", "acme//aria", "acme/u1/", "", None])
def test_scope_parse_rejects_malformed_keys(key):
    with pytest.raises(DomainError):
        Scope.parse(key)


def test_scope_parts_may_not_contain_the_separator():
    with pytest.raises(DomainError, match="without '/'"):
        Scope("a/b", "u", "c")
