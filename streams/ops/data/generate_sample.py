"""Writes sample_turns.jsonl: the demo's conversations (deterministic; re-run to regenerate).

Three tenants, several users and characters, six simulated weeks. Users state preferences, repeat
them, change their minds and answer the character; two deliberately invalid lines show the DLQ path.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

from credence.streams.scope.requests import reflection_id
from credence.tables.clock import format_instant
from credence.tables.scope import scope_key

START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)

SCOPES = [
    ("acme", "alice", "barista"), ("acme", "alice", "tutor"), ("acme", "bob", "barista"),
    ("globex", "carol", "coach"), ("globex", "dan", "coach"), ("initech", "erin", "tutor"),
]

# (week, user text) per persona; later weeks repeat, confirm or contradict earlier statements
STORIES = {
    "alice": ["I love green tea.", "I am learning Rust.", "I live in Lisbon.", "I love green tea, honestly.",
              "I am learning Rust and it is hard.", "I really love green tea.", "I don't like coffee.",
              "I have a cat named Miso.", "I am learning Rust every evening."],
    "bob": ["I love espresso.", "I work as a nurse.", "I love espresso in the morning.",
            "I don't like espresso anymore.", "I prefer decaf now.", "I work as a nurse on night shifts."],
    "carol": ["I like running.", "I am training for a marathon.", "I like running in the rain.",
              "I hate swimming.", "I am training for a marathon in spring.", "I like running a lot."],
    "dan": ["I like cycling.", "I don't like cycling.", "I prefer hiking.", "I prefer hiking on weekends."],
    "erin": ["My name is Erin.", "I am learning French.", "I am learning French for work.",
             "I live in Montreal.", "I am learning French with a tutor."],
}
AI_LINES = ["That sounds lovely!", "Tell me more about that.", "Noted — thanks for sharing.",
            "How did that go?", "Interesting! Why is that?"]
FILLER = ["ok", "haha yes", "what do you think?", "tell me a story", "thanks!", "good morning"]

# In week 3 the character surfaces a reflection it holds (by its deterministic id) and the user answers.
SURFACED = {
    ("acme", "alice", "barista"): ("The user loves green tea.", "Green tea as usual, right?", "yes, exactly"),
    ("acme", "bob", "barista"): ("The user loves espresso.", "An espresso for you?", "no, that's not true anymore"),
    ("globex", "dan", "coach"): ("The user likes cycling.", "Shall we plan a bike ride?", "no, that's wrong"),
    ("initech", "erin", "tutor"): ("The user is learning French.", "Ready for French today?", "yes, that's right"),
}


def generate() -> list[dict]:
    rng = random.Random(7)
    turns: list[dict] = []
    for tenant, user, character in SCOPES:
        ts = START + timedelta(hours=rng.randint(0, 48))
        story = STORIES[user]
        n = 0
        for week in range(6):
            if week == 3 and (tenant, user, character) in SURFACED:
                text, ask, reply = SURFACED[(tenant, user, character)]
                rid = reflection_id(scope_key(tenant, user, character), text)
                for role, line, extra in (("ai", ask, {"surfaced_ids": [rid]}), ("user", reply, {})):
                    ts += timedelta(hours=rng.randint(6, 40))
                    turns.append({"v": 1, "tenant": tenant, "user": user, "character": character,
                                  "turn_id": f"{user}-{character}-{len(turns):04d}", "role": role,
                                  "text": line, "ts": format_instant(ts), **extra})
            for _ in range(rng.randint(3, 5)):
                ts += timedelta(hours=rng.randint(6, 40))
                text = story[min(len(story) - 1, (n // 2) % len(story))] if rng.random() < 0.6 \
                    else rng.choice(FILLER)
                n += 1
                for role, line in (("user", text), ("ai", rng.choice(AI_LINES))):
                    turns.append({"v": 1, "tenant": tenant, "user": user, "character": character,
                                  "turn_id": f"{user}-{character}-{len(turns):04d}", "role": role,
                                  "text": line, "ts": format_instant(ts)})
                    ts += timedelta(minutes=1)
    turns.sort(key=lambda t: t["ts"])
    turns.insert(len(turns) // 3, {"v": 1, "tenant": "acme", "user": "alice", "character": "barista",
                                   "turn_id": "bad-role", "role": "narrator", "text": "?",
                                   "ts": "2026-09-20T10:00:00Z"})
    turns.insert(2 * len(turns) // 3, {"v": 1, "tenant": "acme", "user": "bob", "character": "barista",
                                       "turn_id": "bad-ts", "role": "user", "text": "hi", "ts": "yesterday"})
    return turns


if __name__ == "__main__":
    out = Path(__file__).with_name("sample_turns.jsonl")
    rows = generate()
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"wrote {len(rows)} turns to {out}")
