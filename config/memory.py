"""The seed's memory_settings: thresholds, weights, schedules and budgets of the evidence mechanism.

Owned by the evidence core (tables/). Every default is the seed's number, under the seed's name.
"""

from pydantic import BaseModel, ConfigDict


class MemorySettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
