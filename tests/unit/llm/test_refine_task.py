"""The refine task's two sides in the LLM layer: the prompt's reader maps aliases back and drops what names
an entry the call never offered (an action left with no source is dropped whole); the rules backend splits
only a statement joined by "and" whose second clause has a verb of its own, and merges only restatements."""

import asyncio

import pytest

from credence.streams.llm.aliases import Reader
from credence.streams.llm.models import Observation
from credence.streams.llm.prompts import refine_cluster
from credence.streams.llm.rules.backend import RulesBackend
from credence.streams.llm.rules.refine import split_statement

OBS = [Observation(id="r-fr", text="The user is learning French.", score=1.0),
       Observation(id="r-fr2", text="The user is learning French with a tutor.", score=0.5),
       Observation(id="r-mix", text="The user loves hiking and have a dog named Rex.")]


def _read(out: dict):
    call = refine_cluster.build(OBS)
    reader = Reader("test")
    return call.read(refine_cluster.Output.model_validate(out), reader), reader.dropped


def test_the_reader_maps_aliases_back_and_drops_invented_ones():
    got, dropped = _read({"actions": [
        {"action": "merge", "source_ids": ["O1", "O2", "O9"], "texts": [" The user is learning French. "],
         "reason": "same"},
        {"action": "discard", "source_ids": ["O7"], "texts": [], "reason": "x"}]})
    assert [(a.action, a.source_ids, a.texts) for a in got] == [
        ("merge", ["r-fr", "r-fr2"], ["The user is learning French."])]
    assert dropped == ["O9", "O7"]


def test_the_entries_go_out_aliased_with_their_scores():
    payload = refine_cluster.build(OBS).payload
    assert [(e.id, e.score) for e in payload.entries] == [("O1", 1.0), ("O2", 0.5), ("O3", 0.0)]


@pytest.mark.parametrize("text, pieces", [
    ("The user loves hiking and have a dog named Rex.", ["The user loves hiking.", "The user has a dog named Rex."]),
    ("The user works as a nurse and plays the violin.", ["The user works as a nurse.", "The user plays the violin."]),
    ("The user loves cats and dogs.", []),  # one statement with two objects
    ("The user loves hiking.", []),
    ("The user likes tea and it.", []),  # a piece that does not stand alone: no split
])
def test_the_rules_split_only_two_statements(text, pieces):
    assert split_statement(text) == pieces


def test_the_rules_answer_splits_the_joined_entry_and_merges_the_restatements():
    actions = asyncio.run(RulesBackend().ask(refine_cluster, OBS))
    assert [(a.action, a.source_ids) for a in actions] == [("split", ["r-mix"]), ("merge", ["r-fr", "r-fr2"])]
    assert actions[1].texts == ["The user is learning French with a tutor."]  # the one that says the most
