"""The Parquet journal answers "what was valid at T" in SQL (bi-temporal validity)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from credence.sinks.analytics import VALID_AT_SQL, query, valid_at
from credence.sinks.schema import EVIDENCE, to_row
from credence.sinks.shards import open_archive, write_shards
from credence.tables.entries import changed, new_persona_entry
from credence.tables.lifecycle import archive
from credence.tables.scope import Scope
from credence.tables.validity import supersede

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def _record(entry, event, offset):
    return to_row(EVIDENCE, {
        "v": 1, "event_id": f"{entry.id}@{entry.version}", "tenant": entry.tenant, "user": entry.user,
        "character": entry.character, "entry_id": entry.id, "entry_kind": entry.kind, "event": event,
        "cause": None, "from_status": None, "to_status": None, "at": entry.updated_at.isoformat(),
        "score": 0.0, "tier": "pending", "entry": entry.to_dict()}, 0, offset)


def test_valid_at_reads_the_version_that_held(archive_settings_factory, capsys):
    settings = archive_settings_factory()
    v1 = new_persona_entry("p1", Scope("acme", "u1", "aria"), "enjoys hiking", T0)
    closed, v3 = supersede(v1, changed(v1, T0 + H, text="loves hiking"), T0 + H)
    gone = archive(v3, T0 + 2 * H)
    other = new_persona_entry("p2", Scope("acme", "u1", "aria"), "drinks tea", T0 + H / 2)
    rows = [_record(e, ev, i) for i, (e, ev) in enumerate(
        [(v1, "created"), (other, "created"), (closed, "invalidated"), (v3, "merged"), (gone, "archived")])]
    # a pre-seed-002 shard (no validity columns) reads too: its meaning held from created_at
    old = replace(new_persona_entry("p0", Scope("acme", "u1", "aria"), "old", T0), version=1)
    old_row = _record(old, "created", 9)
    for column in ("valid_from", "invalidated_at"):
        old_row.values[column] = None
    write_shards(open_archive(settings.root), EVIDENCE, 0, rows + [old_row], settings)

    def texts(at):
        return {r["entry_id"]: r["text"] for r in valid_at(settings.root, at)}

    assert texts(T0 - H) == {}
    assert texts(T0) == {"p0": "old", "p1": "enjoys hiking"}
    assert texts(T0 + H - timedelta(microseconds=1)) == {"p0": "old", "p1": "enjoys hiking", "p2": "drinks tea"}
    assert texts(T0 + H) == {"p0": "old", "p1": "loves hiking", "p2": "drinks tea"}
    assert texts(T0 + 2 * H) == {"p0": "old", "p2": "drinks tea"}
    csv = query(settings.root, VALID_AT_SQL, [T0 + H], "csv")
    assert "loves hiking" in csv and "enjoys hiking" not in csv
    capsys.readouterr()
    from credence.streams.ops.cli import main as cli

    assert cli(["archive", "query", VALID_AT_SQL, "--param", "2026-03-01T13:00:00Z", "--root", settings.root,
                "--format", "csv"]) == 0
    printed = capsys.readouterr().out
    assert "loves hiking" in printed and "enjoys hiking" not in printed and "drinks tea" in printed
