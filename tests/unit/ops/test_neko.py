"""`credence import --from-neko`'s mapping, on the fixture installations under tests/fixtures/neko/ (built
from N.E.K.O.'s on-disk formats): every status, shards, a restored entry in both places, group-chat
subjects as their own users, the old counter-less shapes; scores equal the origin's formulas at a fixed
instant, computed here from the raw files, independently of credence's evidence code."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from credence.streams.ops.neko import from_neko, map_installation
from credence.streams.ops.neko_entries import instant
from credence.streams.ops.neko_files import CharacterFiles, Installation, read_installation
from credence.streams.ops.portable import parse
from credence.tables.entries import Entry
from credence.tables.rendering import render_memory_block
from credence.tables.scope import Scope

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "neko"
NOW = datetime(2026, 9, 1, tzinfo=UTC)
SHANGHAI = timezone(timedelta(hours=8))  # Asia/Shanghai has kept +08:00 since 1991
SCOPE = Scope("acme", "kim", "小天")


def mapped(name: str = "modern") -> dict[str, Entry]:
    out = map_installation(read_installation(FIXTURES / name), "acme", "kim", SHANGHAI, NOW)
    return {e.id: e for e in out.entries}


def raw_rows() -> dict[str, dict]:
    folder = FIXTURES / "modern" / "memory" / "小天"
    rows = {r["id"]: r for r in json.loads((folder / "reflections.json").read_text())}
    persona = json.loads((folder / "persona.json").read_text())
    for key, section in persona.items():
        if key != "__meta__":
            rows |= {r["id"]: r for r in section["facts"] if not r.get("protected")}
    return rows


def origin_score(row: dict, now: datetime) -> float:
    """N.E.K.O.'s memory/evidence.py, from the formats document: naive local clocks, age 0 when missing."""
    def age(clock):
        if not clock:
            return 0.0
        local = datetime.fromisoformat(clock).replace(tzinfo=SHANGHAI)
        return max(0.0, (now - local).total_seconds() / 86400)
    rein = (row.get("reinforcement") or 0.0) * 0.5 ** (age(row.get("rein_last_signal_at")) / 30)
    disp = (row.get("disputation") or 0.0) * 0.5 ** (age(row.get("disp_last_signal_at")) / 180)
    return rein - disp


def test_every_status_maps_onto_credence():
    got = {i: (e.kind, e.status, e.merged_into_id) for i, e in mapped().items() if e.user == "kim"}
    assert got == {
        "ref_pending0000000001": ("reflection", "pending", None),
        "ref_pending0000000002": ("reflection", "pending", None),
        "ref_confirmed00000001": ("reflection", "confirmed", None),
        "ref_confirmed00000002": ("reflection", "confirmed", None),
        "ref_promoted00000001": ("reflection", "promoted", "prom_ref_promoted00000001"),
        "ref_merged0000000001": ("reflection", "promoted", "prom_ref_promoted00000001"),  # merged = absorbed
        "ref_denied0000000001": ("reflection", "denied", None),
        "ref_blocked000000001": ("reflection", "promote_blocked", None),
        "ref_archived00000001": ("reflection", "archived", None),
        "ref_oldpromoted00001": ("reflection", "archived", "prom_ref_oldpromoted00001"),  # only in a shard
        "prom_ref_promoted00000001": ("persona", "active", None),
        "manual_20260710120000_1a2b3c4d": ("persona", "active", None),
        "manual_20260711120000_5e6f7a8b": ("persona", "active", None),
        "manual_20260712120000_9c0d1e2f": ("persona", "active", None),
        "manual_20260601120000_bbbb1111": ("persona", "archived", None),
    }


def test_counters_and_clocks_are_carried_verbatim():
    e = mapped()["ref_pending0000000002"].evidence
    assert (e.reinforcement, e.disputation, e.sub_zero_days, str(e.sub_zero_last_increment_date)) == (
        0.0, 1.0, 3, "2026-08-12")
    assert e.rein_last_signal_at is None  # no clock stays no clock: no decay, as at the origin
    assert e.disp_last_signal_at == datetime(2026, 8, 10, 13, 30, tzinfo=UTC)  # 21:30 in Shanghai
    assert mapped()["ref_confirmed00000002"].evidence.user_fact_reinforce_count == 3
    blocked = mapped()["ref_blocked000000001"]
    assert (blocked.promote_attempts, blocked.last_promote_attempt_at) == (5, datetime(2026, 6, 30, 16, tzinfo=UTC))
    archived = mapped()["ref_archived00000001"]
    assert archived.evidence.reinforcement == -0.2 and archived.archived_at == datetime(2026, 5, 19, 19, tzinfo=UTC)


def test_scores_equal_the_origins_formula_at_a_fixed_instant():
    entries, rows = mapped(), raw_rows()
    for instant_ in (NOW, NOW + timedelta(days=45, hours=7)):
        for eid, row in rows.items():
            if eid in entries:
                assert math.isclose(entries[eid].score(instant_), origin_score(row, instant_), abs_tol=1e-12), eid
    assert len(set(rows) & set(entries)) == 14  # every mapped row of the active views


def test_the_memory_block_holds_what_the_origin_renders():
    entries = [e for e in mapped().values() if e.scope == SCOPE.key]
    out = map_installation(read_installation(FIXTURES / "modern"), "acme", "kim", SHANGHAI, NOW)
    (card,) = out.cards
    block = render_memory_block(SCOPE, [*card.scope_entries(SCOPE), *entries], NOW)
    rows = raw_rows()
    # The origin: every non-suppressed active persona entry, pending reflections, confirmed ones scoring > 0.
    # credence also renders a promote_blocked reflection scoring > 0 (it is still the confirmed observation
    # and its promotion is retried); the origin's dead-letter leaves it out. That difference is credence's.
    origin = {i for i, r in rows.items() if i in {e.id for e in entries} and (
        r.get("status") is None or r["status"] == "pending"
        or (r["status"] == "confirmed" and origin_score(r, NOW) > 0))}
    assert {e.id for e in block.entries if not e.protected} - {"ref_blocked000000001"} == origin
    assert [e.text for e in block.protected] == [t for _, t in card.entries]


def test_the_card_is_built_from_characters_json():
    out = map_installation(read_installation(FIXTURES / "modern"), "acme", "kim", SHANGHAI, NOW)
    (card,) = out.cards
    texts = [t for _, t in card.entries]
    assert texts == ["昵称: 天酱", "性格: 温柔、好奇", "爱好: 画画、散步", "档案名: 测试人员", "昵称: 小明", "生日: 3月4日"]
    ids = dict((t, i) for i, t in card.entries)
    assert ids["昵称: 小明"] == "card_" + __import__("hashlib").sha256("master:昵称".encode()).hexdigest()[:8]
    assert not any(e.protected for e in mapped().values())  # card rows are never scope entries


def test_group_chat_subjects_are_their_own_users():
    users = {e.id: e.user for e in mapped().values() if e.user != "kim"}
    assert users == {"ref_restored00000001": "group_participant:qq:100:200",
                     "manual_20260801120000_aaaa0000": "group_participant:qq:100:300"}


def test_a_restored_entry_in_both_places_is_the_views_copy():
    restored = mapped()["ref_restored00000001"]
    assert restored.status == "confirmed" and restored.archived_at is None


def test_the_report_names_what_was_skipped_and_why():
    _, notes = from_neko(FIXTURES / "modern", "acme", "kim", "Asia/Shanghai", NOW)
    text = "\n".join(notes)
    for expected in ("2026-08-02_00000000.json: an empty shard", "2026-08-03_deadbeef.json: unreadable",
                     "character folder '旧角色': not in characters.json", "'ref_partialtriple001': part of the subject",
                     "1 queued persona corrections", "3 facts", "found in the view and in a shard"):
        assert expected in text
    assert ".nkatmp" not in text  # temp files are not memory: ignored like the origin ignores them


def test_the_version_history_comes_along():
    (old,) = mapped()["manual_20260710120000_1a2b3c4d"].version_history
    assert (old.text, old.replaced_at, old.reason) == ("主人住在北京", datetime(2026, 7, 10, 4, tzinfo=UTC),
                                                       "correction_merge")


def test_old_shapes_read_and_counter_less_reflections_get_the_origins_seed():
    entries = mapped("legacy")
    assert {e.text: e.subject for e in entries.values() if e.kind == "persona"} == {
        "主人叫阿明": "master", "主人喜欢夜跑": "master", "小黑是一只黑猫": "neko"}
    scores = {e.id: e.score(NOW) for e in entries.values() if e.kind == "reflection"}
    assert scores == {"ref_old_pending00001": 0.0, "ref_old_confirmed001": 1.0, "ref_old_promoted0001": 2.0,
                      "ref_old_denied000001": -2.0, "ref_old_archived0001": -2.0}
    assert entries["ref_old_archived0001"].status == "archived"  # the legacy flat archive, never migrated
    _, notes = from_neko(FIXTURES / "legacy", "acme", "kim", "Asia/Shanghai", NOW)
    assert any("小白/settings.json: the pre-persona memory" in n for n in notes)  # reported, not guessed at


def test_the_mapped_lines_read_back_without_a_problem():
    lines, _ = from_neko(FIXTURES / "modern", "acme", "kim", "Asia/Shanghai", NOW)
    parsed = parse(lines)
    assert parsed.problems == [] and parsed.switches == {"acme": True}
    assert sum(len(v) for v in parsed.scopes.values()) == 17


naive = st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2099, 1, 1))
offsets = st.integers(min_value=-12 * 60, max_value=14 * 60).map(lambda m: timezone(timedelta(minutes=m)))


@settings(max_examples=60, deadline=None)
@given(naive, offsets)
def test_a_naive_local_time_is_read_in_the_given_zone(local, zone):
    assert instant(local.isoformat(), zone) == (local - zone.utcoffset(None)).replace(tzinfo=UTC)
    assert instant(local.replace(tzinfo=UTC).isoformat(), zone) == local.replace(tzinfo=UTC)  # aware stays


counter = st.floats(min_value=-5, max_value=20, allow_nan=False)
clock = st.none() | naive.map(lambda d: d.isoformat())


@settings(max_examples=60, deadline=None)
@given(counter, counter.map(abs), clock, clock, st.integers(0, 40), naive)
def test_any_rows_score_is_the_origins(rein, disp, rein_at, disp_at, days, at):
    row = {"id": "ref_x", "text": "x", "status": "confirmed", "created_at": "2026-01-01T00:00:00",
           "reinforcement": rein, "disputation": disp, "rein_last_signal_at": rein_at,
           "disp_last_signal_at": disp_at, "sub_zero_days": days}
    files = CharacterFiles("c", reflections=[row])
    (entry,) = map_installation(Installation(characters={"c": files}), "t", "u", SHANGHAI, NOW).entries
    now = at.replace(tzinfo=SHANGHAI)
    assert math.isclose(entry.score(now), origin_score(row, now), rel_tol=1e-9, abs_tol=1e-12)
    assert entry.evidence.sub_zero_days == days
