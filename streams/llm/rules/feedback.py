"""The user's reply to surfaced reflections: confirm, deny or ignore, by cue words.

Denial cues are checked first because they contain confirmation words ("that's not true", "not
really"). When the reply names some surfaced reflections' subjects the cue applies to those only."""

from __future__ import annotations

import re
from collections.abc import Sequence

from credence.streams.llm.models import FeedbackDecision, Observation
from credence.tables.text import REBUTTAL_WORDS, clean, content_stems

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


# Asking to have something forgotten, as opposed to "don't forget …" (a request to remember).
_FORGET = re.compile(
    r"(?<!don't )(?<!do not )(?<!never )\b(?:forget (?:about )?(?:what|that|it|this|everything|all|my|the|about)|"
    r"(?:don't|do not|please don't|stop) remember(?:ing)? (?:that|this|it|what|my)|"
    r"(?:delete|erase|remove|drop) (?:what i (?:said|told you)|that|this|it|everything|my)\b|"
    r"vergiss|olvida|olvídate)",
    re.IGNORECASE,
)


_SELF_DENIAL = re.compile(r"\bi(?:'m| am| do|'ve| have)? ?(?:not|n't|never|no longer)\b", re.IGNORECASE)


def asks_to_forget(text: str) -> bool:
    """Whether the message asks the character to forget (stop remembering) something."""
    return _FORGET.search(clean(text)) is not None


def reply_cue(reply_text: str) -> str:
    text = clean(reply_text)
    if _DENY.search(text):
        return "deny"
    if _CONFIRM.search(text):
        return "confirm"
    return "ignore"


def check_feedback(reply_text: str, surfaced: Sequence[Observation]) -> list[FeedbackDecision]:
    """A reply that names some surfaced reflections answers those. One that names none answers them all,
    except a denial made of the user's own statement about something else ("No, I'm not tired.", "No,
    that's wrong. I don't work as a nurse anymore.") : that is not about them."""
    cue = reply_cue(reply_text)
    said = content_stems(reply_text)
    named = {obs.id for obs in surfaced if said & (content_stems(obs.text) | content_stems(obs.subject))}
    if cue == "deny" and not named and _SELF_DENIAL.search(clean(reply_text)) and said - REBUTTAL_WORDS:
        cue = "ignore"  # the "no" goes with a statement of the user's own about another thing
    return [
        FeedbackDecision(id=obs.id, decision=cue if (not named or obs.id in named) else "ignore")  # type: ignore[arg-type]
        for obs in surfaced
    ]
