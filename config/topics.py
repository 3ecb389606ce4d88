"""The topics credence declares, one spec each: topic creation (streams/ops/admin.py, the worker's Faust
declarations in streams/runtime/topics.py), the settings (retention, full names), the sinks and the docs'
topic table (docs/operations/kafka.md) all read this registry. Adding a topic: docs/architecture.md
lists the files to touch.

Every topic has CREDENCE_TOPIC_PARTITIONS partitions: a scope's records must land on the partition that
holds its state, whichever topic they come from, so no topic gets a count of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Cleanup = Literal["delete", "compact"]
# The Settings field that holds a topic's retention in hours (-1 = forever).
Retention = Literal["topic_retention_hours", "dlq_retention_hours", "journal_retention_hours"]


@dataclass(frozen=True)
class TopicSpec:
    name: str  # logical name: the full topic is <CREDENCE_TOPIC_PREFIX>.<name>
    cleanup: Cleanup  # compacted topics keep the latest record per key; forgetting tombstones them
    retention: Retention  # ignored by the broker under compaction alone, set anyway so the config is whole
    record: str  # the record type of its values (docs/records.md; credence.records.envelope.RECORDS)
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


_SPECS = (
    TopicSpec("turns", "delete", "topic_retention_hours", "turn", "scope", agent_input=True),
    TopicSpec("feedback", "delete", "topic_retention_hours", "feedback", "scope", agent_input=True),
    TopicSpec("facts", "delete", "topic_retention_hours", "control", "scope", agent_input=True),
    # The journal and the hand-off to the Parquet sink, which re-reads whole spans after a restart.
    TopicSpec("evidence", "delete", "journal_retention_hours", "evidence", "scope"),
    TopicSpec("archive", "delete", "journal_retention_hours", "archive", "scope"),
    TopicSpec("control", "delete", "topic_retention_hours", "control", "scope", agent_input=True),
    TopicSpec("dlq", "delete", "dlq_retention_hours", "dead letter", "original"),
    # Every worker reads these two whole into memory (streams/api/directory.py).
    TopicSpec("tenants", "compact", "topic_retention_hours", "tenant", "tenant"),
    TopicSpec("cards", "compact", "topic_retention_hours", "card", "tenant/character"),
    # Seed 002: recall hits (input of the scope agent) and the bridge's fact candidates (output only, kept
    # like the journal: switching the bridge off never removes a candidate already emitted).
    TopicSpec("usage", "delete", "topic_retention_hours", "usage", "scope", agent_input=True),
    TopicSpec("fact-candidates", "delete", "journal_retention_hours", "fact candidate", "scope"),
)

TOPICS: dict[str, TopicSpec] = {spec.name: spec for spec in _SPECS}
# What the scope agent subscribes to, in this order (streams/runtime/agent.py); all keyed by scope.
INPUTS: tuple[str, ...] = tuple(spec.name for spec in _SPECS if spec.agent_input)
