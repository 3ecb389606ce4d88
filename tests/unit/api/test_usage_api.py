"""Usage strength on the API: which recall hits reinforce, and soft-archived entries leave recall."""

from dataclasses import replace
from datetime import UTC, datetime

from credence.streams.api.memory_ops import recallable, usage_ids
from credence.streams.api.routes import ROUTES
from credence.tables.entries import new_persona_entry
from credence.tables.scope import Scope

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SCOPE = Scope("acme", "u1", "aria")


def test_only_the_scopes_own_unprotected_hits_reinforce_once_each():
    own, card = new_persona_entry("p1", SCOPE, "a", T0), new_persona_entry("c1", SCOPE, "b", T0, protected=True)
    assert usage_ids(["p1", "c1", "p1", "elsewhere"], [own, card]) == ["p1"]


def test_soft_archived_entries_are_not_recalled():
    live = new_persona_entry("p1", SCOPE, "a", T0)
    gone = replace(new_persona_entry("p2", SCOPE, "b", T0), status="archived")
    assert recallable([live, gone]) == [live]


def test_restore_and_nominate_routes_are_scope_routes_with_a_human_in_the_body():
    routes = {r.name: r for r in ROUTES}
    for name in ("post_restore", "post_nominate"):
        assert routes[name].by_owner and routes[name].status == 202
        assert "by" in routes[name].body.model_fields


def test_the_consensus_route_takes_a_score_from_zero_to_one_and_who_sets_it():
    import pytest
    from pydantic import ValidationError

    from credence.api_models import ConsensusRequest

    route = {r.name: r for r in ROUTES}["put_consensus"]
    assert route.method == "PUT" and route.path.endswith("/entries/{entry_id}/consensus")
    assert route.by_owner and route.status == 202 and route.body is ConsensusRequest
    assert ConsensusRequest.model_validate({"score": 1, "by": "ops"}).score == 1.0
    for bad in ({"score": 1.5, "by": "ops"}, {"score": -0.1, "by": "ops"}, {"score": True, "by": "ops"},
                {"score": "0.5", "by": "ops"}, {"score": 0.5, "by": " "}, {"score": 0.5}, {"by": "ops"},
                {"score": 0.5, "by": "ops", "extra": 1}):
        with pytest.raises(ValidationError):
            ConsensusRequest.model_validate(bad)
