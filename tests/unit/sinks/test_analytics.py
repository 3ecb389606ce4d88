"""DuckDB views, queries and the funnel over shards written by the shard writer."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from credence.errors import ArchiveError
from credence.sinks.analytics import FunnelRow, connect, funnel, query, report
from credence.sinks.schema import ARCHIVE, EVIDENCE, to_row
from credence.sinks.shards import open_archive, write_shards

# A hand-built journal: (tenant, at, event, to_status). The expected funnel below is counted by hand.
JOURNAL = [
    ("acme", "2026-03-01T08:00:00Z", "created", "pending"),
    ("acme", "2026-03-01T09:00:00Z", "created", "pending"),
    ("acme", "2026-03-01T10:00:00Z", "signal", None),
    ("acme", "2026-03-01T23:59:59.999999Z", "transition", "confirmed"),
    ("acme", "2026-03-02T00:00:00Z", "transition", "promoted"),  # the next UTC day
    ("acme", "2026-03-02T01:00:00+02:00", "transition", "denied"),  # 2026-03-01T23:00Z
    ("acme", "2026-03-02T05:00:00Z", "merged", None),
    ("acme", "2026-03-02T06:00:00Z", "archived", "archived"),
    ("acme", "2026-03-02T07:00:00Z", "transition", "confirmed"),
    ("acme", "2026-03-02T08:00:00Z", "promotion_rejected", None),
    ("acme", "2026-03-02T09:00:00Z", "transition", "promote_blocked"),
    ("acme", "2026-03-02T10:00:00Z", "promotion_unblocked", "confirmed"),  # a retry, not a new confirmation
    ("acme", "2026-03-02T11:00:00Z", "promotion_dropped", None),
    ("globex", "2026-03-01T12:00:00Z", "created", "pending"),
    ("globex", "2026-03-01T13:00:00Z", "mention", None),
]
EXPECTED = [
    FunnelRow("acme", date(2026, 3, 1), created=2, confirmed=1, promoted=0, merged=0, denied=1, archived=0),
    FunnelRow("acme", date(2026, 3, 2), created=0, confirmed=1, promoted=1, merged=1, denied=0, archived=1,
              rejected=1, blocked=1, unblocked=1, dropped=1),
    FunnelRow("globex", date(2026, 3, 1), created=1, confirmed=0, promoted=0, merged=0, denied=0, archived=0),
]


@pytest.fixture
def journal_root(archive_settings_factory, evidence_record_factory, archive_record_factory):
    settings = archive_settings_factory(max_rows_per_shard=2)  # several shards per day
    archive = open_archive(settings.root)
    rows = [
        to_row(EVIDENCE, evidence_record_factory(tenant=t, at=at, event=ev, to_status=st, entry_id=f"e{i}",
                                                 kind="persona" if i % 3 == 0 else "reflection"), i % 2, i)
        for i, (t, at, ev, st) in enumerate(JOURNAL)
    ]
    for partition in (0, 1):
        write_shards(archive, EVIDENCE, partition, [r for r in rows if r.values["topic_partition"] == partition], settings)
    write_shards(archive, ARCHIVE, 0, [to_row(ARCHIVE, archive_record_factory(tenant="o'hara co"), 0, 7)], settings)
    return settings.root


def test_funnel_reproduces_the_hand_counted_journal(journal_root):
    conn = connect(journal_root)
    assert funnel(conn) == EXPECTED
    assert funnel(conn, tenant="acme", since=date(2026, 3, 2)) == EXPECTED[1:2]
    assert funnel(conn, until=date(2026, 3, 1)) == [EXPECTED[0], EXPECTED[2]]


def test_the_funnel_counts_facts_events_and_entry_versions_leave_them_out(
        archive_settings_factory, evidence_record_factory, facts_event_factory):
    settings = archive_settings_factory()
    records = [
        evidence_record_factory(event="created", to_status="pending", at="2026-03-01T08:00:00Z"),
        facts_event_factory("stage2_dropped", "switch_off", ("f1", "f2"), datetime(2026, 3, 1, 9, tzinfo=UTC)),
        facts_event_factory("stage2_dropped", "switch_off", ("f3",), datetime(2026, 3, 1, 10, tzinfo=UTC),
                            request_id="stage2-2"),
        facts_event_factory("facts_failed", "max_request_failures", ("f4", "f5", "f6"),
                            datetime(2026, 3, 1, 11, tzinfo=UTC), request_id="synthesis-3", task="synthesis"),
    ]
    rows = [to_row(EVIDENCE, r, 0, i) for i, r in enumerate(records)]
    write_shards(open_archive(settings.root), EVIDENCE, 0, rows, settings)
    conn = connect(settings.root)
    assert funnel(conn) == [FunnelRow("acme", date(2026, 3, 1), created=1, confirmed=0, promoted=0, merged=0,
                                      denied=0, archived=0, stage2_dropped=2, facts_failed=1)]
    assert "stage2_dropped" in report(settings.root)
    assert conn.execute("SELECT count(*) FROM evidence WHERE kind = 'facts'").fetchone()[0] == 3
    assert conn.execute("SELECT entry_id FROM entry_versions").fetchall() == [("e1",)]


def test_views_pin_utc_and_decode_partitions(journal_root):
    conn = connect(journal_root)
    assert conn.execute("SELECT current_setting('TimeZone')").fetchone()[0] == "UTC"
    tenant, day, kind = conn.execute("SELECT tenant, date, kind FROM archive").fetchone()
    assert (tenant, day, kind) == ("o'hara co", date(2026, 1, 21), "reflection")
    assert conn.execute("SELECT count(*) FROM evidence").fetchone()[0] == len(JOURNAL)


def test_query_binds_parameters_and_renders_each_format(journal_root):
    sql = "SELECT tenant, count(*) AS n FROM evidence WHERE tenant = ? GROUP BY tenant"
    hostile = "acme' OR '1'='1"
    assert json.loads(query(journal_root, sql, [hostile], fmt="json")) == []
    assert json.loads(query(journal_root, sql, ["acme"], fmt="json")) == [{"tenant": "acme", "n": 13}]
    assert query(journal_root, sql, ["acme"], fmt="csv") == "tenant,n\nacme,13\n"
    table = query(journal_root, 'SELECT min("at") AS first_at FROM evidence WHERE tenant = $t', {"t": "globex"})
    assert "2026-03-01T12:00:00+00:00" in table and "(1 row)" in table


def test_query_errors_say_what_failed(journal_root):
    with pytest.raises(ArchiveError, match="query failed"):
        query(journal_root, "SELECT nope FROM evidence")
    with pytest.raises(ArchiveError, match="output format"):
        query(journal_root, "SELECT 1", fmt="xml")


def test_no_shards_yet_gives_empty_views_with_the_columns(tmp_path):
    conn = connect(str(tmp_path / "nothing"))
    assert funnel(conn) == []
    columns = [d[0] for d in conn.execute("SELECT * FROM archive").description]
    assert {"tenant", "kind", "date", "snapshot_json", "archived_at", "offset"} <= set(columns)


def test_report_returns_the_table_and_writes_a_png(journal_root, tmp_path):
    png = tmp_path / "out" / "funnel.png"
    text = report(journal_root, png)
    assert "created" in text and "globex" in text and "(3 rows)" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_on_an_empty_archive_is_an_empty_table(tmp_path):
    assert "(0 rows)" in report(str(tmp_path / "nothing"), tmp_path / "empty.png")
    assert (tmp_path / "empty.png").exists()


def test_report_filters_like_the_funnel(journal_root):
    text = report(journal_root, tenant="acme", until=date(2026, 3, 1))
    assert "acme" in text and "globex" not in text and "(1 row)" in text


def test_cli_archive_query_binds_parameters_and_report_writes_a_png(journal_root, tmp_path, capsys):
    from credence.streams.ops.cli import main as cli

    sql = "SELECT tenant, count(*) AS n FROM evidence WHERE event = ? GROUP BY tenant ORDER BY tenant"
    assert cli(["archive", "query", sql, "--param", "created", "--format", "json", "--root", journal_root]) == 0
    assert json.loads(capsys.readouterr().out) == [{"tenant": "acme", "n": 2}, {"tenant": "globex", "n": 1}]
    png = tmp_path / "funnel.png"
    assert cli(["archive", "report", "--png", str(png), "--root", journal_root]) == 0
    out = capsys.readouterr().out
    assert "globex" in out and "2026-03-02" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a query error is a clear CLI error, not a traceback
    assert cli(["archive", "query", "SELECT nope FROM evidence", "--root", journal_root]) == 2
    assert "query failed" in capsys.readouterr().err
