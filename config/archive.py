"""Archive sink settings: where Parquet shards go and how large one may grow."""

from pydantic import BaseModel, ConfigDict


class ArchiveSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
