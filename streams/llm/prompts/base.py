"""What every task prompt shares: the user message carries the variable input as one JSON document
after a fixed marker, so the system prefix stays byte-identical across calls (vLLM prefix caching)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

INPUT_MARKER = "INPUT (JSON):\n"


class Wire(BaseModel):
    """Output models are sent as strict JSON schemas; strict mode wants closed objects."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def render_json(payload: BaseModel) -> str:
    return INPUT_MARKER + payload.model_dump_json()


def schema_name(name: str, version: int) -> str:
    return f"{name}_v{version}"
