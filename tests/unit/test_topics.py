"""The topic registry (credence/records/topics.py) is the one place topic properties live: creation, the worker's
declarations, the settings, the sinks and the docs' table all agree with it."""

from __future__ import annotations

import re

import pytest

from credence.config import load_settings
from credence.errors import ConfigError
from credence.records.topics import TOPICS
from credence.sinks.registry import build_sinks
from credence.sinks.schema import ARCHIVE_TABLES
from credence.streams.ops.admin import topic_configs
from credence.streams.runtime.agent import INPUTS
from credence.streams.runtime.topics import Topics
from tests.support.readme_blocks import documentation

TABLE = "**Topics credence creates**"
# The page that holds the table (the README's section moved to the docs site: operations/kafka.md).
PAGE = next(text for text in (p.read_text() for p in documentation()) if TABLE in text)


def documented_topic_rows() -> dict[str, tuple[str, str]]:
    """logical topic -> (cleanup, retention cell) from the docs' table of the topics credence creates."""
    section = PAGE[PAGE.index(TABLE):]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("| `<prefix>."):
            if rows and not line.startswith("|"):
                break
            continue
        topic, _holds, cleanup, retention = (cell.strip() for cell in line.strip("|").split("|"))
        for name in re.findall(r"`(?:<prefix>)?\.([a-z-]+)`", topic):
            rows[name] = (cleanup, retention)
    return rows


def test_the_documented_topic_table_matches_the_registry():
    rows = documented_topic_rows()
    assert set(rows) == set(TOPICS)
    for name, spec in TOPICS.items():
        cleanup, retention = rows[name]
        assert cleanup == spec.cleanup, name
        if spec.compacted:
            assert retention.startswith("none"), name
        else:
            assert f"`CREDENCE_{spec.retention.upper()}`" in retention, name


def test_topic_configs_come_from_the_spec():
    settings = load_settings(dlq_retention_hours=5, journal_retention_hours=-1, topic_retention_hours=7)
    assert topic_configs(settings, "dlq")["retention.ms"] == str(5 * 3_600_000)
    assert topic_configs(settings, "evidence")["retention.ms"] == "-1"
    assert topic_configs(settings, "turns")["retention.ms"] == str(7 * 3_600_000)
    for name, spec in TOPICS.items():
        assert topic_configs(settings, name)["cleanup.policy"] == spec.cleanup


def test_an_unknown_topic_has_no_retention():
    with pytest.raises(ConfigError, match="unknown topic 'turn'"):
        load_settings().retention_hours("turn")


def test_the_worker_declares_every_topic_and_reads_scope_keyed_ones():
    declared = Topics({spec: object() for spec in TOPICS.values()})
    assert [spec.attribute for spec in TOPICS.values() if getattr(declared, spec.attribute, None) is not None] == [
        spec.attribute for spec in TOPICS.values()]
    assert all(spec.key == "scope" for spec in INPUTS)


def test_the_archive_sinks_read_their_topic_spec():
    settings = load_settings()
    sinks = build_sinks(settings, ("archive", "evidence"))
    assert [sink.name for sink in sinks] == ["archive", "evidence"]  # else the loop checks nothing
    for sink in sinks:
        spec = TOPICS[sink.name]
        assert sink.topics == (settings.topic(spec.name),)
        assert spec.record.name in ARCHIVE_TABLES


def test_the_agents_inputs_are_the_topics_the_registry_marks_as_its_input():
    assert INPUTS == tuple(spec for spec in TOPICS.values() if spec.agent_input)
    assert tuple(spec.name for spec in INPUTS) == ("turns", "feedback", "facts", "control", "usage")  # the order the agent subscribes in
