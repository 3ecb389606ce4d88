"""The replayer takes scope parts from the record's fields, never from splitting a key (a user id with
'/' once ended `credence demo --input` in a traceback at the end-of-input flush)."""

from __future__ import annotations

import asyncio
import json

import pytest

from credence.errors import DomainError
from credence.streams.ops.replay import key_of, scope_of, scopes_in, send_control
from credence.tables.scope import Scope


def line(**fields) -> bytes:
    base = {"v": 1, "tenant": "acme", "user": "alice", "character": "barista", "turn_id": "t1",
            "role": "user", "text": "hi", "ts": "2026-09-01T09:00:00Z"}
    return json.dumps(base | fields).encode()


def test_scopes_come_from_record_fields_and_skip_invalid_ones(tmp_path):
    path = tmp_path / "turns.jsonl"
    path.write_bytes(b"\n".join([line(), line(user="ali/ce"), line(user=".."), line(character=" x"),
                                 b'{"tenant": "acme"', line(tenant=["a"]), line(user="bob"), line()]))
    assert scopes_in(path) == [Scope("acme", "alice", "barista"), Scope("acme", "bob", "barista")]
    assert key_of(line(user="ali/ce")) is None  # unkeyed: the worker dead-letters it with the reason
    assert key_of(line()) == b"acme/alice/barista"
    assert scope_of(b"\xff\xfe") is None and scope_of(b"[" * 100_000) is None


def test_a_key_string_naming_no_valid_scope_is_refused_before_anything_is_sent():
    with pytest.raises(DomainError, match="exactly three parts"):
        asyncio.run(send_control("127.0.0.1:1", None, ["acme/ali/ce/barista"], "flush"))
