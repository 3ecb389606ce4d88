"""A long, real-style multi-session dialogue for judging what the memory keeps (deterministic by seed),
and a scorer for `credence demo` output: stored entries, how many pass the shared self-containment gate,
and pairs of near-duplicate live entries per scope.

    python -m credence.streams.ops.data.generate_dialogue write /tmp/dialogue.jsonl [--seed 7]
    credence demo --input /tmp/dialogue.jsonl > /tmp/demo.txt
    python -m credence.streams.ops.data.generate_dialogue score /tmp/demo.txt [--sample 50]

Users talk the way people do: first-person anecdotes with pronouns ("My dogs are my world. I love them
and how much joy they bring me."), praise and questions for the character ("I love your commitment.",
"What do you like to do for fun?"), other people's likes, restatements with a detail added, and the
occasional change of mind; the character answers and sometimes asks back.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from datetime import UTC, datetime, timedelta
from itertools import combinations
from pathlib import Path

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
USERS = ("maya", "omar", "lena", "raj", "sofia", "tom", "yuki", "ines")
CHARACTERS = ("companion", "coach")
PETS = (("dog", "pups"), ("cat", "kitties"), ("rabbit", "bunnies"))
HOBBIES = ("hiking", "baking sourdough", "painting watercolours", "playing chess", "gardening", "rock climbing",
           "knitting", "birdwatching", "cycling", "photography")
FOODS = ("sushi", "spicy ramen", "dark chocolate", "green tea", "tacos", "olives", "blue cheese", "mangoes")
PLACES = ("Lisbon", "Montreal", "Osaka", "Berlin", "Nairobi", "Lima", "Austin", "Glasgow")
JOBS = ("a nurse", "a teacher", "a software engineer", "a carpenter", "an accountant", "a chef")
LANGUAGES = ("French", "Japanese", "Spanish", "German", "Korean")
BANDS = ("Radiohead", "ABBA", "Daft Punk", "the Beatles", "Fleetwood Mac")
THINGS = ("bike", "camera", "guitar", "telescope", "kayak")
AI_LINES = ("That sounds lovely! Tell me more.", "How did that make you feel?", "I'm glad you shared that.",
            "What did you do next?", "Haha, that is great.", "Do you want to talk about your week?",
            "I love hearing about your day.", "What's been on your mind lately?")
SMALL_TALK = ("hey, I'm back!", "long day at work today", "what do you like to do for fun?",
              "do you have any pets?", "haha yes", "ok", "tell me a story", "how are you today?",
              "thanks, that helps", "good morning!", "what would you do in my place?", "lol")


def _persona(rng: random.Random) -> dict:
    pet, pups = rng.choice(PETS)
    hobbies = rng.sample(HOBBIES, 3)
    foods = rng.sample(FOODS, 3)
    return {"pet": pet, "pups": pups, "n": rng.choice(("two", "three", "four")), "hobbies": hobbies,
            "foods": foods, "place": rng.choice(PLACES), "job": rng.choice(JOBS), "lang": rng.choice(LANGUAGES),
            "band": rng.choice(BANDS), "thing": rng.choice(THINGS), "name": rng.choice(("Sam", "Alex", "Kim"))}


def _statements(p: dict) -> list[str]:
    h, f = p["hobbies"], p["foods"]
    return [
        f"My name is {p['name']}.",
        f"I have {p['n']} {p['pet']}s. I love them and how much joy they bring me.",
        f"My {p['pet']}s are my world. I love them so much.",
        f"I love checking out new parks with my {p['n']} {p['pups']}.",
        "I love trying out new recipes and experimenting in the kitchen with my kids on Sundays.",
        "Honestly I love your commitment, you always listen to me.",
        "I enjoy what you do, it really helps me.",
        f"I really love {h[0]}. It keeps me sane after work.",
        f"I got a new {p['thing']} last month. I love it!",
        f"I am learning {p['lang']} with a tutor.",
        f"I'm still learning {p['lang']}, it is hard but fun.",
        f"I live in {p['place']}.",
        f"I moved to {p['place']} two years ago and I love it there.",
        f"I work as {p['job']}.",
        f"I hate {f[2]}, I just can't eat them.",
        f"I love {f[0]}.",
        f"I really love {f[0]}, I could eat it every day.",
        f"My sister loves {f[1]} but I don't.",
        "I love it when it rains on a Sunday morning.",
        "I like that.",
        f"I prefer {f[1]} over {f[0]} on cold days.",
        f"I'm a huge fan of {p['band']}.",
        "I love spending time with my family and my friends.",
        f"I enjoy {h[1]} in the mountains near my home.",
        f"I like {h[2]}.",
        f"I don't like {h[2]} anymore, I stopped last month.",
        "I love how you always know what to say to me!",
        f"I love {h[1]}.",
        "We love going to the beach in summer.",
        "I love them.",
    ]


def _scope_turns(user: str, character: str, rng: random.Random, sessions: int) -> list[dict]:
    p, out = _persona(rng), []
    story = _statements(p)
    ts = START + timedelta(hours=rng.randint(0, 48))

    def add(role: str, text: str) -> None:
        out.append({"v": 1, "tenant": "dialogue", "user": user, "character": character,
                    "turn_id": f"{user}-{character}-{len(out):05d}", "role": role, "text": text,
                    "ts": ts.isoformat().replace("+00:00", "Z")})

    for _session in range(sessions):
        ts += timedelta(days=rng.randint(2, 9))
        for _ in range(rng.randint(4, 8)):
            ts += timedelta(minutes=rng.randint(1, 6))
            add("user", rng.choice(story) if rng.random() < 0.6 else rng.choice(SMALL_TALK))
            ts += timedelta(seconds=rng.randint(5, 40))
            add("ai", rng.choice(AI_LINES))
    return out


def write(path: Path, seed: int = 7, sessions: int = 24) -> int:
    rng = random.Random(seed)
    turns = [t for user in USERS for character in CHARACTERS for t in _scope_turns(user, character, rng, sessions)]
    turns.sort(key=lambda t: (t["ts"], t["turn_id"]))
    path.write_text("".join(json.dumps(t) + "\n" for t in turns))
    return len(turns)


_ENTRY = re.compile(r"^  (persona|reflection)\s+(\S+)\s+(\S+)\s+(\S+)  (.*)$")
_SCOPE = re.compile(r"^== (\S+): ")
_LIVE = {("persona", "active"), ("reflection", "pending"), ("reflection", "confirmed"),
         ("reflection", "promote_blocked")}


def score(lines: list[str], sample: int = 50) -> dict:
    """From `credence demo` output: entries stored, how many are self-contained, near-duplicate live pairs."""
    from credence.config.memory import DEFAULT_MEMORY_SETTINGS
    from credence.streams.scope.restate import same_statement
    from credence.tables.statement import is_self_contained

    entries, scope = [], ""
    for line in lines:
        if m := _SCOPE.match(line):
            scope = m.group(1)
        elif m := _ENTRY.match(line):
            entries.append((scope, m.group(1), m.group(2), m.group(5)))
    verdicts = [(e, is_self_contained(e[3])) for e in entries]
    live = [e for e in entries if (e[1], e[2]) in _LIVE]
    pairs = [(a[3], b[3]) for a, b in combinations(live, 2)
             if a[0] == b[0] and same_statement(a[3], b[3], DEFAULT_MEMORY_SETTINGS)]
    picked = random.Random(0).sample(entries, min(sample, len(entries)))
    return {"entries": len(entries), "self_contained": sum(1 for _, (ok, _r) in verdicts if ok),
            "refused": [(e[3], r) for e, (ok, r) in verdicts if not ok], "near_duplicate_pairs": pairs,
            "sample": [f"{e[0]} {e[1]}/{e[2]}: {e[3]}" for e in picked]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="generate_dialogue")
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("path", type=Path)
    w.add_argument("--seed", type=int, default=7)
    w.add_argument("--sessions", type=int, default=24)
    s = sub.add_parser("score")
    s.add_argument("path", type=Path)
    s.add_argument("--sample", type=int, default=50)
    args = parser.parse_args(argv)
    if args.cmd == "write":
        print(f"{write(args.path, args.seed, args.sessions)} turns -> {args.path}")
        return 0
    json.dump(score(args.path.read_text().splitlines(), args.sample), sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
