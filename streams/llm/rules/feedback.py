"""The user's reply to surfaced reflections: confirm, deny or ignore, by cue words.

Denial cues are checked first because they contain confirmation words ("that's not true", "not
really"). When the reply names some surfaced reflections' subjects the cue applies to those only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from credence.streams.llm.models import FeedbackDecision, Observation
from credence.streams.llm.rules.text import clean, content_stems

_DENY = re.compile(
    r"\b(?:no|nope|nah|not really|not at all|wrong|incorrect|not true|that's not true|that is not true|"
    r"that's wrong|not quite|false)\b",
    re.IGNORECASE,
)
_CONFIRM = re.compile(
    r"\b(?:yes|yeah|yep|yup|right|exactly|that's true|that is true|true|correct|indeed|absolutely|"
    r"of course|spot on)\b",
    re.IGNORECASE,
)


def reply_cue(reply_text: str) -> str:
    text = clean(reply_text)
    if _DENY.search(text):
        return "deny"
    if _CONFIRM.search(text):
        return "confirm"
    return "ignore"


def check_feedback(reply_text: str, surfaced: Sequence[Observation]) -> list[FeedbackDecision]:
    cue = reply_cue(reply_text)
    said = content_stems(reply_text)
    named = {obs.id for obs in surfaced if said & (content_stems(obs.text) | content_stems(obs.subject))}
    return [
        FeedbackDecision(id=obs.id, decision=cue if (not named or obs.id in named) else "ignore")  # type: ignore[arg-type]
        for obs in surfaced
    ]
