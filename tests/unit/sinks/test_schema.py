"""Record -> row validation for the archive and evidence tables."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from credence.errors import ArchiveError
from credence.sinks.schema import ARCHIVE, EVIDENCE, SNAPSHOT_FIELDS, ShardKey, rows_to_table, tenant_segment, to_row


def test_archive_row_holds_every_snapshot_key(archive_record_factory):
    record = archive_record_factory(archived_at="2026-01-21T23:30:00+01:00")
    row = to_row(ARCHIVE, record, 2, 41)
    assert row.key == ShardKey("acme", "reflection", "2026-01-21")  # 22:30 UTC
    v = row.values
    assert v["archived_at"] == datetime(2026, 1, 21, 22, 30, tzinfo=UTC)
    assert v["reinforcement"] == 0.2 and v["sub_zero_days"] == 14
    assert v["sub_zero_last_increment_date"] == date(2026, 1, 20)
    assert v["rein_last_signal_at"] == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert v["source_fact_ids"] == ["f1", "f2"] and v["entry_archived_at"] is not None
    assert (v["topic_partition"], v["offset"]) == (2, 41)
    assert json.loads(v["snapshot_json"]) == record["entry"]
    table = rows_to_table(ARCHIVE, [row])
    assert {column for _, column, _ in SNAPSHOT_FIELDS} <= set(table.column_names)


def test_unknown_snapshot_keys_survive_in_snapshot_json(archive_record_factory):
    record = archive_record_factory(mood="sunny")
    row = to_row(ARCHIVE, record, 0, 0)
    assert json.loads(row.values["snapshot_json"])["mood"] == "sunny"


def test_evidence_row_partitions_by_event_time(evidence_record_factory):
    row = to_row(EVIDENCE, evidence_record_factory(event="transition", at="2026-02-01T00:00:00Z",
                                                to_status="confirmed"), 0, 3)
    assert row.key.date == "2026-02-01"
    assert row.values["to_status"] == "confirmed" and row.values["event_id"] == "e1@1"


@pytest.mark.parametrize("mutate, reason", [
    (lambda r: r.update(v=2), "unsupported record version"),
    (lambda r: r.update(tenant="a/b"), "without '/'"),
    (lambda r: r.update(user=""), "'user' must be a non-empty string"),
    (lambda r: r.update(entry_kind="fact"), "entry_kind"),
    (lambda r: r.update(archived_at="yesterday"), "not ISO-8601"),
    (lambda r: r.update(archived_at="2026-01-21T10:00:00"), "needs a UTC offset"),
    (lambda r: r.pop("entry"), "'entry' must be an object"),
    (lambda r: r["entry"].update(id="other"), "disagrees"),
    (lambda r: r["entry"].update(importance=11), "outside 1..10"),
    (lambda r: r["entry"].update(importance=True), "must be an integer"),
    (lambda r: r["entry"].update(source_fact_ids="f1"), "list of strings"),
    (lambda r: r["entry"]["evidence"].update(reinforcement="high"), "must be a number"),
    (lambda r: r["entry"].update(protected="no"), "true/false"),
])
def test_malformed_records_are_rejected_with_the_reason(archive_record_factory, mutate, reason):
    record = archive_record_factory()
    mutate(record)
    with pytest.raises(ArchiveError, match=reason):
        to_row(ARCHIVE, record, 0, 0)


def test_a_facts_event_is_an_evidence_row_under_its_own_kind(facts_event_factory):
    record = facts_event_factory(fact_ids=("f1", "f2", "f3"))
    row = to_row(EVIDENCE, record, 1, 7)
    assert row.key == ShardKey("acme", "facts", "2026-01-21") and "kind=facts" in row.key.path()
    v = row.values
    assert (v["event"], v["cause"], v["entry_id"], v["event_id"]) == \
        ("facts_failed", "max_request_failures", record["entry_id"], f"{record['entry_id']}@1")
    assert v["version"] == 1 and v["text"] is None and v["score"] is None
    assert json.loads(v["snapshot_json"]) == record["entry"]  # request, task, fact ids and reason kept whole
    assert rows_to_table(EVIDENCE, [row]).num_rows == 1


@pytest.mark.parametrize("mutate, reason", [
    (lambda r: r["entry"].update(fact_ids="f1"), "list of strings"),
    (lambda r: r["entry"].pop("fact_ids"), "fact_ids must be a list"),
    (lambda r: r["entry"].update(id="other"), "disagrees"),
])
def test_malformed_facts_events_are_rejected_with_the_reason(facts_event_factory, mutate, reason):
    record = facts_event_factory()
    mutate(record)
    with pytest.raises(ArchiveError, match=reason):
        to_row(EVIDENCE, record, 0, 0)


def test_the_archive_table_holds_entries_only(facts_event_factory):
    record = dict(facts_event_factory(), archived_at="2026-01-21T10:00:00Z")
    with pytest.raises(ArchiveError, match="entry_kind"):
        to_row(ARCHIVE, record, 0, 0)


def test_not_an_object_is_rejected():
    with pytest.raises(ArchiveError, match="expected a JSON object"):
        to_row(EVIDENCE, [1, 2], 0, 0)


def test_tenant_segments_are_percent_encoded_and_reject_paths():
    assert tenant_segment("acme corp=1") == "acme%20corp%3D1"
    for bad in ("", "..", "a/b", "x\ny"):
        with pytest.raises(ArchiveError):
            tenant_segment(bad)
