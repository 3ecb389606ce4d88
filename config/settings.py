"""The one settings object. Environment variables are CREDENCE_*; nested sections use ``__``
(CREDENCE_MEMORY__REINFORCEMENT_HALF_LIFE_DAYS=30). Loaded once at start by ``load_settings()``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal, Protocol

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from credence.config.api import ApiSettings
from credence.config.archive import ArchiveSettings
from credence.config.kafka import KafkaSettings
from credence.config.llm import LLMSettings
from credence.config.memory import MemorySettings
from credence.config.pipeline import PipelineSettings
from credence.config.state import StateSettings
from credence.config.usage import BridgeSettings, UsageSettings
from credence.errors import ConfigError

_KAFKA_NAME = re.compile(r"[A-Za-z0-9._-]{1,200}")


class TopicFields(Protocol):
    """What the settings read of a topic's spec (credence/records/topics.py: TOPICS.x, a layer above)."""

    name: str
    retention: str  # the Settings field holding its retention in hours


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CREDENCE_", env_nested_delimiter="__", frozen=True, extra="forbid"
    )

    # Kafka. Empty bootstrap means "start the embedded broker".
    kafka_bootstrap: str = ""
    topic_prefix: str = "credence"
    topic_partitions: int = Field(default=4, ge=1)
    # Replicas per topic and how many must hold a write before acks=all counts it. Production: 3 and 2
    # (one broker may be down for an upgrade, none loses an acknowledged write); the embedded broker: 1, 1.
    topic_replicas: int = Field(default=1, ge=1)
    topic_min_insync_replicas: int = Field(default=1, ge=1)
    topic_retention_hours: int = Field(default=24 * 7, ge=1)
    dlq_retention_hours: int = Field(default=24 * 30, ge=1)
    # credence.evidence and credence.archive are the journal and the hand-off to the Parquet sink, which
    # re-reads whole spans after a restart: kept forever by default (-1), like a log should be.
    # credence.fact-candidates (the bridge to facts) is kept the same way: switching the bridge off never
    # removes a candidate already emitted.
    journal_retention_hours: int = Field(default=-1, ge=-1)
    # How soon a crashed worker's partitions move to a live one (Kafka's group session timeout).
    kafka_session_timeout_s: float = Field(default=10.0, ge=6.0, le=300.0)
    # A worker or sink told to stop while the brokers are unreachable exits at most this long after (its
    # Kafka consumer would otherwise wait them out); it commits nothing it did not apply either way.
    worker_stop_grace_s: float = Field(default=10.0, gt=0, le=300.0)

    # Worker.
    app_id: str = "credence"
    data_dir: Path = Path(".credence")
    table_store: Literal["rocksdb", "memory"] = "rocksdb"  # rocksdict or memory; docs/operations/table-store.md
    web_port: int = Field(default=6066, ge=0, le=65535)
    web_host: str = "127.0.0.1"
    # The URL the other workers reach this one's web port at (owner routing of /v1 reads). Empty: the
    # bind host, or when that is a wildcard (0.0.0.0, ::) this machine's first non-loopback address.
    canonical_url: str = ""
    # The hot-read switch file (powerful_memory_enabled, per tenant); read on each decision.
    core_config_path: Path = Path("config/core_config.json")

    # Embedded broker (used only when kafka_bootstrap is empty).
    kafka_version: str = "4.1.1"
    broker_cache_dir: Path = Path.home() / ".cache" / "credence" / "kafka"
    broker_port: int = Field(default=0, ge=0, le=65535)  # 0 = pick a free port

    # What `credence sink` runs, by name (sinks/registry.py knows them): comma-separated or a JSON list.
    sinks: Annotated[tuple[str, ...], NoDecode] = ("archive", "evidence")

    kafka: KafkaSettings = KafkaSettings()
    memory: MemorySettings = MemorySettings()
    llm: LLMSettings = LLMSettings()
    archive: ArchiveSettings = ArchiveSettings()
    pipeline: PipelineSettings = PipelineSettings()
    state: StateSettings = StateSettings()
    usage: UsageSettings = UsageSettings()
    bridge: BridgeSettings = BridgeSettings()
    api: ApiSettings = ApiSettings()

    @model_validator(mode="after")
    def _replicas(self) -> Settings:
        if self.topic_min_insync_replicas > self.topic_replicas:
            raise ValueError(f"topic_min_insync_replicas {self.topic_min_insync_replicas} exceeds topic_replicas "
                             f"{self.topic_replicas}: no acks=all write could ever succeed")
        return self

    @field_validator("sinks", mode="before")
    @classmethod
    def _sink_names(cls, value):
        if isinstance(value, str):
            value = json.loads(value) if value.lstrip().startswith("[") else value.split(",")
        names = tuple(str(name).strip() for name in value)
        if not names or "" in names or len(set(names)) != len(names):
            raise ValueError(f"name each sink once, comma-separated (e.g. archive,evidence); got {value!r}")
        return names

    @field_validator("canonical_url")
    @classmethod
    def _routable_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not re.fullmatch(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?", value):
            raise ValueError(f"must be http(s)://host[:port], a URL the other workers can reach; got {value[:80]!r}")
        if value and re.match(r"https?://(0\.0\.0\.0|\[::\])(:|$)", value):
            raise ValueError(f"{value} is a wildcard address, not one another worker can reach")
        return value

    @field_validator("topic_prefix", "app_id")
    @classmethod
    def _kafka_name(cls, value: str) -> str:
        # Both become Kafka topic names (<prefix>.turns, <app_id>-…-changelog): Kafka's rule, checked now
        # rather than as an unclear broker error later.
        if not _KAFKA_NAME.fullmatch(value) or value in (".", ".."):
            raise ValueError("must be 1-200 characters of letters, digits, '.', '_' or '-' (a Kafka topic "
                             f"name), not '.' or '..'; got {value[:40]!r}")
        return value

    def retention_hours(self, topic: TopicFields) -> int:
        """Retention of a topic in hours (-1 = forever): the setting its spec names."""
        retention = getattr(topic, "retention", None)
        if retention is None:
            raise ConfigError(f"unknown topic {topic!r}: name a topic by its spec (TOPICS.<topic>)")
        return getattr(self, retention)

    def topic(self, topic: TopicFields | str) -> str:
        """Full topic name of a topic (TOPICS.turns -> "credence.turns"; a logical name works too)."""
        return f"{self.topic_prefix}.{getattr(topic, 'name', topic)}"


def load_settings(**overrides) -> Settings:
    """Read settings from the environment (plus explicit overrides); raise ConfigError with the reason."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(f"invalid credence settings: {exc}") from exc
    except SettingsError as exc:  # a value the environment source cannot even parse (broken JSON)
        raise ConfigError(f"invalid credence settings: {exc} ({exc.__cause__})") from exc
