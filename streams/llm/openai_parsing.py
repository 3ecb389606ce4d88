"""What a failed attempt looks like, and the request a retry sends instead of repeating itself.

Output naming an id the call never handed out is not a failure: the prompt modules' readers drop that
item and count it (see credence.streams.llm.aliases). A retry follows only transport failures,
malformed JSON and schema-invalid output."""

from __future__ import annotations

from typing import Any

from credence.streams.llm.prompts.base import INPUT_MARKER

# A retry of the identical request at temperature 0 returns the identical answer from a deterministic
# server; each retry therefore samples a little warmer (up to the cap) with its own seed and, after bad
# content, says why.
RETRY_TEMPERATURE_STEP = 0.2
RETRY_TEMPERATURE_MAX = 0.8
REPAIR_PREFIX = "NOTE: your previous answer was rejected ("
REPAIR_SUFFIX = "). Answer again with JSON that matches the schema exactly.\n\n"


class TransientFailure(Exception):
    """A failed attempt worth retrying; retry_after is the server's hint, when it gave one. content is
    True when the server answered but the answer was unusable (a repair hint can help)."""

    def __init__(self, reason: str, retry_after: float | None = None, *, content: bool = False) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.content = content


def attempt_temperature(attempt: int) -> float:
    """0 on the first attempt (deterministic answers); warmer on each retry."""
    return round(min(RETRY_TEMPERATURE_MAX, RETRY_TEMPERATURE_STEP * (attempt - 1)), 2)


def repair_hint(failure: TransientFailure | None) -> str:
    """A line before the input marker naming what was wrong with the last answer (never after it: the
    input must stay exactly the data)."""
    if failure is None or not failure.content:
        return ""
    reason = " ".join(str(failure).split())[:160].replace("(", "[").replace(")", "]")
    return f"{REPAIR_PREFIX}{reason}{REPAIR_SUFFIX}"


def split_user_message(content: str) -> tuple[str, str]:
    """(repair hint, input JSON) of a user message; the hint is "" on a first attempt."""
    at = content.find(INPUT_MARKER)
    if at < 0:
        raise ValueError("user message lacks the input marker")
    return content[:at], content[at + len(INPUT_MARKER):]


def message_content(data: Any) -> str:
    return data["choices"][0]["message"]["content"]
