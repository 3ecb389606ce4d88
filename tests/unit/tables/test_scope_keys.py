"""A scope key is built and parsed by tables/scope.py alone (Scope, scope_key, user_prefix, tenant_of)."""

from __future__ import annotations

import re
import sys
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from credence.errors import DomainError
from credence.records.control import restore_record
from credence.records.inputs import decode_input
from credence.records.topics import TOPICS
from credence.records.turn import TurnRecord
from credence.records.usage import usage_record
from credence.tables.scope import _UNPRINTABLE, Scope, scope_key, tenant_of, user_prefix, user_prefix_of

ROOT = Path(__file__).resolve().parents[3]
PART = st.text(st.characters(categories=("L", "N", "Pd")), min_size=1, max_size=12)
AT = datetime(2026, 1, 1, tzinfo=UTC)
REMAINING: set[str] = set()  # modules allowed to build or split a key by hand: none
# Archive paths and a report's "p50/p99" figures, not scope keys.
PATHS = {"sinks/forget.py", "sinks/erase.py", "sinks/shards.py", "benchmarks/__main__.py"}
HAND_MADE = re.compile(r'(?<!r)split\("/"|f"\{[^}]+\}/\{[^}]+\}/|"/"\.join\(|r?index\("/"\)')


@given(tenant=PART, user=PART, character=PART)
def test_key_parse_prefix_and_tenant_agree(tenant, user, character):
    key = scope_key(tenant, user, character)
    assert Scope.parse(key) == Scope(tenant, user, character) and str(Scope.parse(key)) == key
    assert key.startswith(user_prefix(tenant, user))
    assert tenant_of(key) == tenant_of(user_prefix(tenant, user)) == tenant


@given(tenant=PART, user=PART, character=PART)
def test_a_scope_round_trips_through_its_key_and_its_record_fields(tenant, user, character):
    scope = Scope(tenant, user, character)
    assert Scope.parse(str(scope)) == scope == Scope(**scope.fields())
    assert list(scope.fields()) == ["tenant", "user", "character"]
    assert user_prefix_of(scope.key) == user_prefix_of(user_prefix(tenant, user)) == user_prefix(tenant, user)


@pytest.mark.parametrize("key, message", [
    ("acme/alice", "exactly three parts"), ("acme/alice/barista/x", "exactly three parts"),
    ("acme//barista", "scope user must be a non-empty string"), (None, "must be a string"),
    ("acme/ alice/barista", "without '/', control characters or edge spaces"),
])
def test_parsing_a_key_refuses_what_is_not_a_scope(key, message):
    with pytest.raises(DomainError, match=message):
        Scope.parse(key)


def test_no_printable_character_is_of_a_category_a_scope_part_refuses():
    # The scope-part check trusts str.isprintable() before looking characters up one by one.
    chars = (chr(i) for i in range(sys.maxunicode + 1))
    assert not [hex(ord(c)) for c in chars if c.isprintable() and unicodedata.category(c) in _UNPRINTABLE]


def test_records_built_for_a_scope_parse_it_and_refuse_a_broken_one():
    record = usage_record("acme/alice/barista", ["e1"], "recall", AT)
    assert (record["tenant"], record["user"], record["character"]) == ("acme", "alice", "barista")
    with pytest.raises(DomainError, match="three parts"):
        restore_record("acme/alice", "e1", "ops", AT)


def test_a_forget_is_keyed_by_the_user_prefix():
    raw = b'{"v":1,"type":"forget","tenant":"acme","user":"alice"}'
    assert decode_input(TOPICS.control, raw).scope == user_prefix("acme", "alice") == "acme/alice/"


@given(tenant=PART, user=PART, character=PART)
def test_an_input_carries_the_tenant_and_user_prefix_of_its_key(tenant, user, character):
    # The worker reads them off the input (its switch, a new scope's incarnation), never off the key again.
    turn = TurnRecord(tenant, user, character, "t1", "user", "hi", AT).encode()
    usage = orjson.dumps(usage_record(scope_key(tenant, user, character), ["e1"], "recall", AT))
    forget = orjson.dumps({"v": 1, "type": "forget", "tenant": tenant, "user": user})
    for topic, raw in ((TOPICS.turns, turn), (TOPICS.usage, usage), (TOPICS.control, forget)):
        item = decode_input(topic, raw)
        assert (item.tenant, item.prefix) == (tenant_of(item.scope), user_prefix_of(item.scope)), topic.name


def test_no_other_product_module_builds_or_splits_a_scope_key_by_hand():
    found = set()
    for folder in ("streams", "sinks", "credence", "tables", "config", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if HAND_MADE.search(path.read_text()):
                found.add(str(path.relative_to(ROOT)))
    assert found - {"tables/scope.py"} - PATHS <= REMAINING, sorted(found - REMAINING - PATHS)
