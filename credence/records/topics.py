"""The topics credence declares, one spec each: topic creation (streams/ops/admin.py, the worker's Faust
declarations in streams/runtime/topics.py), the settings (retention, full names), the sinks and the docs'
topic table (docs/operations/kafka.md) all read this registry. Adding a topic: docs/architecture.md
lists the files to touch.

Every topic has CREDENCE_TOPIC_PARTITIONS partitions: a scope's records must land on the partition that
holds its state, whichever topic they come from, so no topic gets a count of its own.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from credence.records.envelope import (
    ARCHIVE,
    CARD,
    CONTROL,
    DEAD_LETTER,
    EVIDENCE,
    FACT_CANDIDATE,
    FEEDBACK,
    TENANT,
    TURN,
    USAGE,
    RecordType,
)

Cleanup = Literal["delete", "compact"]
# The Settings field that holds a topic's retention in hours (-1 = forever).
Retention = Literal["topic_retention_hours", "dlq_retention_hours", "journal_retention_hours"]


@dataclass(frozen=True)
class TopicSpec:
    name: str  # logical name: the full topic is <CREDENCE_TOPIC_PREFIX>.<name>
    cleanup: Cleanup  # compacted topics keep the latest record per key; forgetting tombstones them
    retention: Retention  # ignored by the broker under compaction alone, set anyway so the config is whole
    record: RecordType  # the record type of its values (docs/records.md), its decoder's envelope check
    key: Literal["scope", "tenant", "tenant/character", "original"]  # a record's key ("original": the dead
    # record's own key, if it had one)
    codec: Literal["json"] = "json"  # values are UTF-8 JSON objects, keys UTF-8 text; both raw bytes to Kafka
    agent_input: bool = False  # the scope agent reads it: applied in order to its scope's state

    @property
    def compacted(self) -> bool:
        return self.cleanup == "compact"

    @property
    def attribute(self) -> str:
        """The name as a Python identifier (fact-candidates -> fact_candidates)."""
        return self.name.replace("-", "_")


class Registry(Mapping[str, TopicSpec]):
    """The topics, each spec once: by attribute (``TOPICS.evidence``, ``TOPICS.fact_candidates``), the
    handle every sender, reader and declaration takes, and by logical name as a mapping, in this order."""

    turns = TopicSpec("turns", "delete", "topic_retention_hours", TURN, "scope", agent_input=True)
    feedback = TopicSpec("feedback", "delete", "topic_retention_hours", FEEDBACK, "scope", agent_input=True)
    facts = TopicSpec("facts", "delete", "topic_retention_hours", CONTROL, "scope", agent_input=True)
    # The journal and the hand-off to the Parquet sink, which re-reads whole spans after a restart.
    evidence = TopicSpec("evidence", "delete", "journal_retention_hours", EVIDENCE, "scope")
    archive = TopicSpec("archive", "delete", "journal_retention_hours", ARCHIVE, "scope")
    control = TopicSpec("control", "delete", "topic_retention_hours", CONTROL, "scope", agent_input=True)
    dlq = TopicSpec("dlq", "delete", "dlq_retention_hours", DEAD_LETTER, "original")
    # Every worker reads these two whole into memory (streams/api/directory.py).
    tenants = TopicSpec("tenants", "compact", "topic_retention_hours", TENANT, "tenant")
    cards = TopicSpec("cards", "compact", "topic_retention_hours", CARD, "tenant/character")
    # Recall hits (input of the scope agent) and the bridge's fact candidates (output only, kept like the
    # journal: switching the bridge off never removes a candidate already emitted).
    usage = TopicSpec("usage", "delete", "topic_retention_hours", USAGE, "scope", agent_input=True)
    fact_candidates = TopicSpec("fact-candidates", "delete", "journal_retention_hours", FACT_CANDIDATE, "scope")

    def __init__(self) -> None:
        specs = [spec for spec in vars(type(self)).values() if isinstance(spec, TopicSpec)]
        self._by_name = {spec.name: spec for spec in specs}

    def __getitem__(self, name: str) -> TopicSpec:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


TOPICS = Registry()
# What the scope agent subscribes to, in this order (streams/runtime/agent.py); all keyed by scope.
INPUTS: tuple[TopicSpec, ...] = tuple(spec for spec in TOPICS.values() if spec.agent_input)
