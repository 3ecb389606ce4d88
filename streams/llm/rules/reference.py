"""Making a rules-extracted object phrase readable alone: the speaker's own words become the user's
("my pups" -> "their pups", "what I do" -> "what they do"), a pronoun that opens the phrase is resolved to
the one thing of its number the turn named before it ("My dogs are my world. I love them" -> "their
dogs"), and a phrase cut at the word cap loses its dangling tail. What stays unreadable is left for the
shared gate (tables.statement) to refuse."""

from __future__ import annotations

import re

_STOP = (r"are|is|was|were|and|but|or|have|has|had|who|that|which|to|in|on|at|with|for|of|so|really|always|"
         r"last|this|every|all|too|also|because|when|from")
# Things the speaker says are theirs: "my dogs", "I have two dogs", "I got a new bike".
_NAMED = (
    re.compile(rf"\bmy ((?:(?!(?:{_STOP})\b)[a-z-]+ ){{0,2}}?(?!(?:{_STOP})\b)[a-z-]+)(?=\s+(?:{_STOP})\b|\s*[,.!?;]|$)",
               re.IGNORECASE),
    re.compile(r"\bi (?:have|got|bought|adopted|own|found|made|built|planted|rescued)(?: got)? (?:a|an|one|two|three|"
               r"four|five|some|\d+) (?:new |little |old |big |small |young )?([a-z-]+)\b", re.IGNORECASE),
    re.compile(r"\band (?:a|an|one|two|three|four|five|\d+) (?:new |little |old |big |small |young )?([a-z-]+)\b",
               re.IGNORECASE),
)
_PLURAL_PRONOUNS = {"them", "they", "these", "those"}
_DETERMINING = {"this", "that", "these", "those"}
_SINGULAR_PRONOUNS = {"it", "this", "that"}
# Clause words after "it" that make it the expletive or an event ("I love it when it rains"), not a thing.
_NOT_A_THING = {"when", "if", "because", "that", "how", "whenever", "here", "there"}
_SPEAKER = (
    (re.compile(r"\bI(?:'m| am)\b"), "they are"), (re.compile(r"\bI was\b"), "they were"),
    (re.compile(r"\bI've\b"), "they have"), (re.compile(r"\bI'd\b"), "they would"),
    (re.compile(r"\bI'll\b"), "they will"), (re.compile(r"\bI\b"), "they"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "their"), (re.compile(r"\bmine\b", re.IGNORECASE), "theirs"),
    (re.compile(r"\bmyself\b", re.IGNORECASE), "themselves"), (re.compile(r"\bme\b", re.IGNORECASE), "them"),
)
_PREPOSITIONS = {"in", "on", "at", "of", "with", "for", "from", "to", "near", "by", "about", "into"}
# A phrase must not end on these once the word cap has cut it.
_DANGLING_TAIL = {
    "the", "a", "an", "my", "your", "their", "our", "its", "his", "her", "some", "of", "in", "on", "at", "to",
    "for", "with", "from", "by", "about", "into", "and", "or", "but", "so", "because", "if", "when", "while",
    "as", "than", "very", "really", "this", "that", "these", "those", "which", "who",
}


def _plural(noun: str) -> bool:
    return noun.lower().endswith("s") and not noun.lower().endswith(("ss", "us", "is"))


def named_things(statement: str) -> list[str]:
    """The nouns the speaker names as theirs in one statement, in order."""
    found = []
    for pattern in _NAMED:
        for match in pattern.finditer(statement):
            found.append(match.group(1).split()[-1])
    return found


def resolve(raw: str, named: list[str]) -> str | None:
    """For an object phrase that opens with a pronoun: "their <noun>" when exactly one thing of the
    pronoun's number was named; None when the pronoun cannot be resolved (the phrase is dropped). A phrase
    that does not open with a pronoun is returned as it is."""
    words = raw.split()
    head = words[0].lower().strip(".,!?;") if words else ""
    if head not in _PLURAL_PRONOUNS | _SINGULAR_PRONOUNS:
        return raw
    after = words[1].lower().strip(".,!?;") if len(words) > 1 else ""
    if head in _DETERMINING and after and after not in _DANGLING_TAIL | _NOT_A_THING | _NOT_NOUN:
        return raw  # "this park": a determiner with its noun, for resolve_inside
    if head == "it" and after in _NOT_A_THING:
        return None
    plural = head in _PLURAL_PRONOUNS
    # "them" names the one plural thing; "it" may name a situation, so any other thing makes it ambiguous.
    fits = list(dict.fromkeys(n.lower() for n in named if _plural(n) or not plural))
    return f"their {fits[0]}" if len(fits) == 1 else None


def as_the_user(phrase: str) -> str:
    """The speaker's first person, said of the user."""
    for pattern, replacement in _SPEAKER:
        phrase = pattern.sub(replacement, phrase)
    return phrase


_WHEN = (r"(?:(?:a|one|two|three|four|five|six|several|few|\d+) (?:days?|weeks?|months?|years?) ago|"
         r"(?:last|this|next) (?:night|week|weekend|month|year|time|summer|winter)|yesterday|today|recently|"
         r"(?:in|since|back in) (?:january|february|march|april|may|june|july|august|september|october|november|"
         r"december|spring|summer|autumn|fall|winter|(?:19|20)\d\d))")
_HEDGE = r"(?:(?:like|about|around|almost|over) )?"
_TIME_TAIL = re.compile(rf"\s+{_HEDGE}{_WHEN}$", re.IGNORECASE)
_TIME_ONLY = re.compile(rf"^{_WHEN}$", re.IGNORECASE)
_TIME_INSIDE = re.compile(rf"\s+{_HEDGE}{_WHEN}\b", re.IGNORECASE)


def trim_tail(phrase: str, capped: bool = True) -> str:
    """The phrase without a time ("moved to Lima two years ago" is about Lima; "moved to austin last year
    for work" too) and, when the word cap cut it (``capped``), without its dangling tail (a cut article or
    conjunction). Empty when nothing but a time is left ("stopped last month"), or when a phrase the cap
    did not cut ends on one: the speaker's clause was cut ("i like to come to when im stressed")."""
    phrase = _TIME_TAIL.sub("", phrase.strip())
    if _TIME_ONLY.match(phrase):
        return ""
    phrase = _TIME_INSIDE.split(phrase)[0]
    words = phrase.split()
    if words and words[-1].lower() in _DANGLING_TAIL and not capped:
        return ""
    if capped:  # the cap cut a prepositional phrase somewhere: keep the core before the first one
        cut = next((i for i, w in enumerate(words) if i >= 2 and w.lower() in _PREPOSITIONS), len(words))
        words = words[:cut]
    while words and words[-1].lower() in _DANGLING_TAIL:
        words.pop()
    return " ".join(words)


_KIN = (r"mom|mum|mother|dad|father|sister|brother|son|daughter|wife|husband|partner|boyfriend|girlfriend|"
        r"friend|best friend|grandma|grandmother|grandpa|grandfather|uncle|aunt|cousin|roommate|boss|teacher|"
        r"coworker|colleague|neighbou?r|fiancée?|niece|nephew")
_PERSON = re.compile(rf"\bmy ({_KIN})(?: ([A-Z][a-z]+))?\b", re.IGNORECASE)
_PROPER = re.compile(r"(?<=[a-z,] )([A-Z][\w'-]*(?: [A-Z][\w'-]*)*)")
_DEMONSTRATIVE = re.compile(r"\b(?:this|that|these|those) ([a-z]+)\b", re.IGNORECASE)
_NOT_NOUN = {"is", "was", "are", "my", "i", "it", "they", "he", "she", "the", "a", "an", "you", "we", "way", "one",
             "so", "much", "too", "very", "and", "but", "or", "lol", "when", "if", "about"}
_TIME_NOUNS = {"morning", "afternoon", "evening", "night", "week", "weekend", "month", "year", "summer", "winter",
               "spring", "fall", "autumn", "season", "days", "time", "semester"}
_OTHER_PERSON = re.compile(r"\b(?:he|she|him|his|her|hers|himself|herself)\b", re.IGNORECASE)


def named_people(statement: str) -> list[str]:
    """The people a speaker names as theirs, as the user's: "my sister Rosa" -> "Rosa", "my dad" ->
    "their dad"."""
    return [m.group(2) or f"their {m.group(1).lower()}" for m in _PERSON.finditer(statement)]


def named_proper(statement: str) -> list[str]:
    """Proper names the speaker writes with capitals inside a sentence ("Griffith Park", "Khruangbin")."""
    return [m.group(1) for m in _PROPER.finditer(statement) if m.group(1) not in ("I", "I'm", "I've", "I'd")]


def resolve_inside(phrase: str, proper: list[str], people: list[str], own: list[str]) -> str | None:
    """The object phrase with its demonstratives and third persons named from the turn: "this park" ->
    the one proper name named before it ("Griffith Park") or "their park" when the speaker named their
    park; "him"/"her" -> the one person named ("Rosa's cooking"). None when a third person stays unnamed:
    in the speaker's own words he/she never means the user. A demonstrative left unresolved is left for
    the shared gate to refuse."""
    def name_it(m: re.Match[str]) -> str:
        noun = m.group(1)
        if noun.lower() in _NOT_NOUN | _TIME_NOUNS:
            return m.group(0)
        if noun.lower() in {o.lower() for o in own}:
            return f"their {noun}"
        names = list(dict.fromkeys(proper))
        return names[0] if len(names) == 1 else m.group(0)

    phrase = _DEMONSTRATIVE.sub(name_it, phrase)
    if not _OTHER_PERSON.search(phrase):
        return phrase
    person = list(dict.fromkeys(people))
    if len(person) != 1:
        return None
    who = person[0]
    phrase = re.sub(r"\b(?:his|her)\b(?= [a-z])", f"{who}'s", phrase)
    phrase = re.sub(r"\b(?:him|her)\b", who, phrase)
    return None if _OTHER_PERSON.search(phrase) else phrase
