"""The sinks `credence sink` runs: named by CREDENCE_SINKS, checked against the registry before any
connection, each one a base.Sink."""

from __future__ import annotations

import pytest

from credence.config import load_settings
from credence.errors import ConfigError
from credence.sinks.base import Sink
from credence.sinks.parquet import ParquetSink
from credence.sinks.registry import SINKS, build_sinks
from credence.streams.ops import cli


def test_the_default_is_the_archive_and_the_evidence_parquet_sinks(tmp_path):
    settings = load_settings(topic_prefix="p", archive={"root": str(tmp_path)})
    sinks = build_sinks(settings)
    assert [s.name for s in sinks] == ["archive", "evidence"] == list(SINKS)
    assert all(isinstance(s, Sink) and isinstance(s, ParquetSink) for s in sinks)
    assert [(s.topics, s.group_id) for s in sinks] == [
        (("p.archive",), "credence-sink.archive"), (("p.evidence",), "credence-sink.evidence")]


@pytest.mark.parametrize("value, names", [
    ("evidence", ("evidence",)), (" archive , evidence ", ("archive", "evidence")), ('["archive"]', ("archive",)),
])
def test_credence_sinks_takes_a_comma_separated_or_json_list(monkeypatch, value, names):
    monkeypatch.setenv("CREDENCE_SINKS", value)
    assert load_settings().sinks == names


@pytest.mark.parametrize("value", ["", "archive,,evidence", "archive,archive", "[nope"])
def test_an_empty_or_repeated_sink_name_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv("CREDENCE_SINKS", value)
    with pytest.raises(ConfigError, match="sinks"):
        load_settings()


def test_an_unknown_sink_is_refused_with_the_known_ones_named(tmp_path):
    settings = load_settings(sinks="archive,warehouse", archive={"root": str(tmp_path)})
    known = r"unknown sink 'warehouse' in CREDENCE_SINKS; known sinks: archive, evidence"
    with pytest.raises(ConfigError, match=known):
        build_sinks(settings)


def test_credence_sink_exits_2_naming_the_known_sinks_before_connecting(monkeypatch, capsys):
    monkeypatch.setenv("CREDENCE_SINKS", "archive,warehouse")
    monkeypatch.setenv("CREDENCE_KAFKA_BOOTSTRAP", "127.0.0.1:9")  # never reached
    assert cli.main(["sink", "--drain"]) == 2
    assert "known sinks: archive, evidence" in capsys.readouterr().err


def test_credence_sink_help_names_the_setting_and_the_known_sinks(capsys):
    with pytest.raises(SystemExit):
        cli.main(["sink", "--help"])
    out = capsys.readouterr().out
    assert "CREDENCE_SINKS" in out and "known: archive, evidence" in out
