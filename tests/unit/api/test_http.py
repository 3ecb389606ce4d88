"""Request bodies and path parts: 400 for malformed, 422 naming the field, the scope-part rule."""

from __future__ import annotations

import pytest

from credence.api_models import FeedbackRequest, RecallRequest
from credence.errors import ApiError
from credence.streams.api.http import parse_body, path_parts


@pytest.mark.parametrize("raw, status, words", [
    (b"{oops", 400, "JSON"), (b"[1]", 400, "object"), (b"\xff", 400, "JSON"),
    (b'{"entry_id": "e1"}', 422, "kind"), (b'{"entry_id": "e1", "kind": "maybe"}', 422, "kind"),
    (b'{"entry_id": "e1", "kind": "deny", "extra": 1}', 422, "extra"),
    (b'{"entry_id": "", "kind": "deny"}', 422, "entry_id"),
])
def test_bad_bodies(raw, status, words):
    with pytest.raises(ApiError) as err:
        parse_body(FeedbackRequest, raw)
    assert err.value.status == status and words in err.value.reason


def test_good_bodies():
    assert parse_body(FeedbackRequest, b'{"entry_id": "e1", "kind": "deny"}').kind == "deny"
    assert parse_body(RecallRequest, b'{"query": "tea"}').top_k == 10
    with pytest.raises(ApiError):
        parse_body(RecallRequest, b'{"query": "tea", "top_k": 0}')


@pytest.mark.parametrize("value", ["..", " a", "a ", "a\x00", "x" * 201, ""])
def test_path_parts_follow_the_scope_part_rule(value):
    with pytest.raises(ApiError) as err:
        path_parts({"user": value})
    assert err.value.status == 400 and "user" in err.value.reason
