"""Deterministic long conversations for the fault runs: many scopes, months of event time, users who
state, repeat, retract and answer surfaced reflections — so Stage 1, Stage 2, synthesis, feedback,
sweeps and archiving all happen. Same (turns, scopes, seed) → the same bytes, always."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

from credence.streams.scope.requests import reflection_id

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
TENANTS = ("acme", "globex", "initech")
CHARACTERS = ("barista", "tutor", "coach")
LIKES = ("green tea", "espresso", "jazz", "chess", "sushi", "hiking", "cycling", "painting", "poetry",
         "baking", "opera", "karate", "skiing", "gardening", "knitting", "surfing", "origami", "pottery")
LEARNING = ("Rust", "French", "the cello", "Japanese", "chemistry", "sailing")
PLACES = ("Lisbon", "Montreal", "Osaka", "Berlin", "Nairobi", "Lima")
AI_LINES = ("That sounds lovely!", "Tell me more about that.", "Noted, thanks for sharing.",
            "How did that go?", "Interesting! Why is that?")
FILLER = ("ok", "haha yes", "what do you think?", "tell me a story", "thanks!", "good morning")
YES, NO = ("yes, exactly", "yes, that's right"), ("no, that's wrong", "no, that's not true anymore")


def scope_parts(i: int) -> tuple[str, str, str]:
    return TENANTS[i % len(TENANTS)], f"user{i:04d}", CHARACTERS[(i // len(TENANTS)) % len(CHARACTERS)]


def _persona(rng: random.Random) -> list[str]:
    likes = rng.sample(LIKES, 3)
    return [f"I love {likes[0]}.", f"I like {likes[1]}.", f"I am learning {rng.choice(LEARNING)}.",
            f"I live in {rng.choice(PLACES)}.", f"I really love {likes[0]}.", f"I like {likes[2]}.",
            f"I like {likes[1]} a lot."]


def _retractions(story: list[str]) -> list[str]:
    """The second half of a scope: the user takes back what they liked (so entries fall, and archive)."""
    return [s.replace("I like ", "I don't like ").replace(" a lot", "") for s in story if "I like " in s]


def _scope_turns(i: int, n: int, rng: random.Random) -> list[dict]:
    tenant, user, character = scope_parts(i)
    scope = f"{tenant}/{user}/{character}"
    story = _persona(rng)
    loved = story[0][len("I love "):-1]
    ts = START + timedelta(hours=rng.randint(0, 72))
    out: list[dict] = []

    def add(role: str, text: str, **extra) -> None:
        out.append({"v": 1, "tenant": tenant, "user": user, "character": character,
                    "turn_id": f"{user}-{character}-{len(out):05d}", "role": role, "text": text,
                    "ts": ts.isoformat().replace("+00:00", "Z"), **extra})

    k = 0
    while len(out) < n:
        ts += timedelta(hours=rng.randint(4, 60))
        if k and k % 9 == 0:  # the character surfaces what it believes; the user answers
            rid = reflection_id(scope, f"The user loves {loved}.")
            add("ai", f"{loved.capitalize()} as usual?", surfaced_ids=[rid])
            ts += timedelta(minutes=1)
            add("user", rng.choice(NO if rng.random() < 0.3 else YES))
        else:
            said = story if len(out) < n // 2 else _retractions(story)
            text = said[(k // 2) % len(said)] if rng.random() < 0.6 else rng.choice(FILLER)
            add("user", text)
            ts += timedelta(minutes=1)
            add("ai", rng.choice(AI_LINES))
        k += 1
    out = out[:n]
    # A month of silence before the last turn: the sweep archives what stayed below zero for 14 days.
    out[-1]["ts"] = (ts + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    return out


def conversations(turns: int, scopes: int, seed: int) -> list[bytes]:
    """`turns` valid turn records over `scopes` scopes as JSON lines, in event-time order (ties by scope)."""
    rng = random.Random(seed)
    per, extra = divmod(turns, scopes)
    records: list[tuple[str, int, dict]] = []
    for i in range(scopes):
        for j, rec in enumerate(_scope_turns(i, per + (1 if i < extra else 0), random.Random(rng.random()))):
            records.append((rec["ts"], i * 1_000_000 + j, rec))
    records.sort(key=lambda r: (r[0], r[1]))
    return [json.dumps(r[2], separators=(",", ":")).encode() for r in records]
