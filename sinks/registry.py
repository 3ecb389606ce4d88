"""The sinks `credence sink` can run, by the names CREDENCE_SINKS lists.

Adding a sink: a class that satisfies base.Sink (a module of its own under sinks/), one entry here,
and its records in the crash test's table (tests/integration/test_sink_crash.py), which fails for a
registered sink it cannot feed. Factories import their sink when called, so naming the known sinks
(the CLI's help) loads no Parquet or object-store code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from credence.errors import ConfigError
from credence.records.topics import TOPICS, TopicSpec

if TYPE_CHECKING:
    from credence.config import Settings
    from credence.sinks.base import Sink


def _parquet(topic: TopicSpec) -> Callable[[Settings], Sink]:
    """The Parquet archive's sink of one topic, a table named after the topic's record type, under
    CREDENCE_ARCHIVE__ROOT (a folder or s3://…: one sink, another filesystem)."""
    def build(settings: Settings) -> Sink:
        from credence.sinks.parquet import ParquetSink

        return ParquetSink(settings.topic(topic.name), topic.record.name, settings.archive, name=topic.name)
    return build


SINKS: dict[str, Callable[[Settings], Sink]] = {
    "archive": _parquet(TOPICS.archive),  # credence.archive -> <root>/archive
    "evidence": _parquet(TOPICS.evidence),  # credence.evidence -> <root>/evidence
}


def build_sinks(settings: Settings, names: tuple[str, ...] | None = None) -> list[Sink]:
    """The sinks ``names`` (default: settings.sinks) lists, built from ``settings``."""
    names = settings.sinks if names is None else names
    unknown = [n for n in names if n not in SINKS]
    if unknown:
        raise ConfigError(f"unknown sink {', '.join(map(repr, unknown))} in CREDENCE_SINKS; "
                          f"known sinks: {', '.join(SINKS)} (comma-separated, e.g. CREDENCE_SINKS=archive)")
    return [SINKS[n](settings) for n in names]
