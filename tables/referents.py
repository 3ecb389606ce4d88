"""Whether every pointing word of an English statement points at something the statement names
(tables.statement's ``dangling_reference``), and whether its object says anything (``empty_complement``).

The rule is about referents, not words: a statement names things (proper nouns, head nouns after a
determiner, number or preposition, the main verb's bare or gerund object), and it/them/there/here,
him/her and demonstratives need one of them named where they can point at it.

Every case, with its examples: docs/design/statements.md ("Referents in English").
"""

from __future__ import annotations

import re

DETERMINERS = frozenset({
    "a", "an", "the", "their", "his", "its", "s", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    "ten", "some", "many", "several", "few", "each", "every", "one", "any", "no", "another", "other", "both",
    "new", "old", "little", "big", "small", "young", "favourite", "favorite", "own", "first", "second", "best",
})
PREPOSITIONS = frozenset({"in", "at", "on", "to", "near", "from", "with", "for", "about", "into", "by", "around",
                          "of", "onto", "over", "under", "behind", "across", "through", "without"})
CLAUSE_WORDS = frozenset({"and", "but", "because", "so", "when", "while", "how", "what", "that", "which", "who",
                          "if", "since", "as", "whenever", "where", "after", "before", "though", "although", "or"})
PRONOUN_SUBJECTS = frozenset({"they", "he", "she", "it", "we", "you", "i"})
# Not nouns: the words of the predicate and the grammar around it.
_NOT_NOUNS = DETERMINERS | PREPOSITIONS | CLAUSE_WORDS | PRONOUN_SUBJECTS | frozenset({
    "user", "them", "him", "her", "this", "these", "those", "there", "here", "itself", "themselves", "himself",
    "herself", "such", "is", "are", "was", "were", "be", "been", "being", "am", "has", "have", "had", "do",
    "does", "did", "will", "would", "can", "could", "should", "must", "may", "might", "not", "t", "don", "doesn",
    "didn", "isn", "re", "ve", "ll", "d", "m", "really", "also", "always", "still", "often", "now", "never",
    "longer", "just", "too", "very", "much", "more", "most", "all", "then", "than", "like", "likes", "loves",
    "love", "enjoys", "hates", "dislikes", "prefers", "adores", "wants", "needs", "says", "said", "thinks",
    "feels", "finds", "knows", "hopes", "wishes", "believes", "mentions", "used", "usually", "sometimes",
    "actually", "even", "lot", "lol", "every", "day", "again", "anymore", "either", "only", "well", "so",
    "absolutely", "truly", "currently", "recently", "together", "alone", "away", "back", "out", "up", "down",
    "off", "whose", "whom", "why", "yes", "yet", "ever", "almost", "quite", "pretty", "rather", "enough",
    "goes", "go", "going", "went", "come", "comes", "came", "get", "gets", "got", "make", "makes", "made",
    "take", "takes", "took", "see", "sees", "saw", "visit", "visits", "try", "tries", "keep", "keeps",
})
PERSONS = frozenset({
    "mom", "mum", "mother", "dad", "father", "parent", "parents", "brother", "sister", "son", "daughter",
    "friend", "friends", "boyfriend", "girlfriend", "husband", "wife", "partner", "boss", "coworker",
    "colleague", "grandma", "grandmother", "grandpa", "grandfather", "grandparents", "uncle", "aunt", "cousin",
    "kid", "kids", "child", "children", "baby", "nephew", "niece", "teacher", "neighbour", "neighbor", "roommate",
    "fiance", "fiancee", "bestie", "family", "guy", "girl", "man", "woman", "people", "coach", "doctor",
    "dog", "dogs", "cat", "cats", "puppy", "kitten", "pup", "pups", "horse", "bird", "rabbit", "hamster", "pet",
    "team", "band", "stepdad", "stepmom", "twin", "twins", "student", "students", "client", "clients",
})
PLACES = frozenset({"park", "garden", "beach", "lake", "house", "home", "city", "town", "country", "cafe", "café",
                    "restaurant", "gym", "office", "school", "farm", "cabin", "island", "village", "bar", "pub",
                    "shop", "store", "market", "church", "library", "museum", "studio", "apartment", "flat",
                    "neighbourhood", "neighborhood", "club", "coast", "mountains", "forest", "river", "trail"})
_LOCATIVE = frozenset({"in", "at", "to", "near", "from", "into", "around", "by", "across", "through", "over",
                       "behind", "outside", "inside", "up", "down"})
_ING_NOUNS = frozenset({"building", "wedding", "morning", "evening", "painting", "clothing", "meeting",
                        "ceiling", "string", "spring", "feeling", "setting", "stuffing", "pudding", "earring",
                        "offering", "reading", "recording", "drawing", "booking", "filling", "wing", "king"})
_SUBORDINATE = frozenset({"how", "when", "that", "because", "if", "while", "since", "whenever", "where", "as",
                          "though", "although"})
TIMES = frozenset({"morning", "afternoon", "evening", "night", "week", "weekend", "month", "year", "summer",
                   "winter", "spring", "fall", "autumn", "season", "semester", "term", "days", "weeks", "months",
                   "years", "time", "moment", "weekends", "mornings", "evenings", "holiday", "holidays"})
# A verb before "to" that makes what follows an infinitive ("wants to go"), not a place ("goes to school").
_TO_INFINITIVE = frozenset({"want", "wants", "wanted", "need", "needs", "like", "likes", "love", "loves", "hate",
                            "hates", "try", "tries", "plan", "plans", "hope", "hopes", "used", "going", "able",
                            "learning", "learn", "learns", "started", "starts", "begin", "begins", "decided",
                            "prefer", "prefers", "wish", "wishes", "has", "have", "had", "got", "trying",
                            "planning", "gets", "get", "ought", "how", "chooses", "refuses", "tends", "hoping",
                            "enjoy", "enjoys", "helps", "help", "afraid", "excited", "happy", "sad", "nervous"})
_SAYING = frozenset({"says", "said", "thinks", "thought", "feels", "felt", "believes", "knows", "hopes",
                     "mentions", "mentioned", "wishes", "admits", "realises", "realizes", "finds", "notes",
                     "hears", "heard", "learned", "learnt", "sure", "glad", "proud", "worried", "afraid", "so",
                     "such", "think", "know", "believe", "feel", "say", "hope"})
_PRONOUN_FOLLOWERS = frozenset({"about", "so", "too", "much", "very", "more", "a", "all", "again", "anymore",
                                "either", "lol", "now", "as", "when", "because", "and", "but", "or", "is", "was",
                                "s", "stuff", "kind", "sort", "way", "one", "at", "in", "on", "for", "with",
                                "every", "most", "best", "already", "though", "haha", "tbh", "sometimes", "often"})
_EXPLETIVE_BEFORE = frozenset({"find", "finds", "found", "make", "makes", "made", "think", "thinks", "consider",
                               "considers", "keep", "keeps", "take", "takes", "love", "loves", "hate", "hates",
                               "like", "likes", "enjoy", "enjoys", "prefer", "prefers"})
_EXPLETIVE_AFTER = frozenset({"is", "was", "s", "seems", "feels", "takes", "took", "gets", "makes", "helps",
                              "rains", "snows", "matters"})
_EVENT = frozenset({"when", "whenever", "if"})
_LIGHT = frozenset({"do", "does", "did", "is", "are", "was", "were", "say", "says", "said", "mean", "means",
                    "have", "has", "had", "get", "gets", "want", "wants", "like", "likes", "love", "loves",
                    "need", "needs", "feel", "feels", "make", "makes", "go", "goes", "know", "knows"})
_EMPTY_TAIL = re.compile(r"\b(?:what|whatever|how|who|when|whenever|if) (?:they|he|she|it|people|others|everyone|"
                         r"that|this)? ?"
                         r"(?:\w+ )?(?:" + "|".join(sorted(_LIGHT)) + r")(?: (?:now|there|here|too|lol|"
                         r"anymore|every day|all day|it|that|this|like|for fun))*$")


def empty_complement(found: list[str]) -> bool:
    """Whether the statement ends on a free relative that says nothing ("enjoys what they do")."""
    return _EMPTY_TAIL.search(" ".join(found)) is not None


def _noun_candidates(raw: list[str], found: list[str], verb: int | None) -> dict[int, str]:
    """Index -> kind ("proper", "person", "thing", "gerund") of every word the statement names."""
    named: dict[int, str] = {}
    for i, (r, w) in enumerate(zip(raw, found)):
        if i > 0 and r[:1].isupper() and w not in ("user", "i") and w not in _NOT_NOUNS:
            named[i] = "proper"
    for i, w in enumerate(found):
        if w in DETERMINERS or w == "her" or (w in PREPOSITIONS and not _infinitive(found, i)):
            head = _head(found, i + 1)
            if head is not None:
                place = found[head] in PLACES or (w in _LOCATIVE and not _infinitive(found, i)) or (
                    i > 0 and found[i - 1] in _LOCATIVE)
                named.setdefault(head, _kind(found[head], place))
        elif w in _SUBORDINATE and i + 1 < len(found) and found[i + 1] not in _NOT_NOUNS:
            named.setdefault(i + 1, _kind(found[i + 1], False))  # "how books take them": the clause's subject
    if verb is not None and verb + 1 < len(found):
        obj = found[verb + 1]
        if obj not in _NOT_NOUNS and len(obj) > 1:
            named.setdefault(verb + 1, "gerund" if obj.endswith("ing") else _kind(obj, False))
    return named


def _kind(noun: str, place: bool) -> str:
    if noun.endswith("ing") and len(noun) > 5 and noun not in _ING_NOUNS:
        return "gerund"  # "from practicing it": an activity, not a thing named
    if noun in PERSONS:
        return "person"
    if place or noun in PLACES:
        return "place"
    plural = noun.endswith("s") and not noun.endswith(("ss", "us", "is"))
    return "things" if plural else "thing"


def _infinitive(found: list[str], i: int) -> bool:
    return found[i] == "to" and i > 0 and found[i - 1] in _TO_INFINITIVE


def _head(found: list[str], start: int) -> int | None:
    """The last content word of the run starting at ``start`` (skipping determiners and adjectives)."""
    j, head = start, None
    while j < len(found) and (found[j] in DETERMINERS or found[j] not in _NOT_NOUNS):
        if found[j] not in DETERMINERS and len(found[j]) > 1:
            head = j
        elif head is not None:
            break
        j += 1
    return head


def _clause_start(found: list[str], i: int) -> int:
    j = i
    while j > 0 and found[j - 1] not in CLAUSE_WORDS:
        j -= 1
    return j


def _other_subject(found: list[str], named: dict[int, str], i: int) -> bool:
    """Whether the clause holding word i has a subject other than the user before it."""
    start = _clause_start(found, i)
    if start == 0:
        return found[:3] == ["the", "user", "s"] or found[:2] != ["the", "user"]
    return any(j in named for j in range(start, i)) or any(
        w in ("the", "a", "their", "his") for w in found[start:start + 1])


# What each pointing word may stand for: "it" one thing or a place, "them" things or people, "him/her" a
# person (or pet), "there/here" a place; a proper noun may be any of them.
_FITS = {"it": {"thing", "place", "gerund"}, "them": {"things", "person"}, "person": {"person"},
         "place": {"place"}}


def _resolved_by(kind_needed: str, named: dict[int, str], i: int, found: list[str]) -> bool:
    start = _clause_start(found, i)
    for j, kind in named.items():
        if j >= i:
            continue
        if kind == "gerund" and (kind_needed != "it" or j >= start):
            continue  # "loves hiking and does it": only a later clause points back at a gerund
        if kind == "proper" or kind in _FITS[kind_needed]:
            return True
    return False


def unresolved(raw: list[str], found: list[str], verb: int | None) -> bool:
    """Whether a pointing word of the (English) statement points at nothing the statement names."""
    named = _noun_candidates(raw, found, verb)
    for i, w in enumerate(found):
        nxt = found[i + 1] if i + 1 < len(found) else ""
        if w in ("it", "its", "itself") and not _expletive(found, i):
            if not _resolved_by("it", named, i, found):
                return True
        elif w in ("them", "him", "her") and not (w == "her" and nxt and nxt not in _NOT_NOUNS):
            if _other_subject(found, named, i) and not _they_in_clause(found, i):
                continue  # "jazz helps them focus": them is the user
            if not _resolved_by("person" if w != "them" else "them", named, i, found):
                return True
        elif w in ("there", "here") and not _existential(found, i):
            if not _resolved_by("place", named, i, found) and not (w == "here" and nxt == "in"):
                return True
        elif w in ("this", "that", "these", "those", "such") and _demonstrative_unresolved(found, named, i):
            return True
        elif w in ("he", "she") and _user_is_they(found) and not _resolved_by("person", named, i, found):
            return True  # "The user says he is their whole world": "their" is the user, so "he" is not
    return False


def _user_is_they(found: list[str]) -> bool:
    return any(w in ("they", "their", "them", "theirs", "themselves") for w in found)


def _they_in_clause(found: list[str], i: int) -> bool:
    return any(w in ("they", "he", "she") for w in found[_clause_start(found, i):i])


def _expletive(found: list[str], i: int) -> bool:
    before = found[i - 1] if i > 0 else ""
    after = found[i + 1:i + 5]
    if after[:1] and after[0] in _EVENT:
        return True  # "loves it when it rains"
    if before in _EXPLETIVE_BEFORE and {"to", "that"} & set(after):
        return True  # "finds it hard to wake up"
    if i > 0 and found[i - 1] in _EVENT and after[:1] and after[0] in _EXPLETIVE_AFTER:
        return True  # "when it rains"
    return bool(after[:1]) and after[0] in _EXPLETIVE_AFTER and bool({"to", "that", "when", "if"} & set(after[1:]))


def _existential(found: list[str], i: int) -> bool:
    return found[i] == "there" and found[i + 1:i + 2] in (["is"], ["are"], ["was"], ["were"], ["s"], ["has"],
                                                         ["have"], ["had"], ["will"], ["isn"], ["aren"])


def _demonstrative_unresolved(found: list[str], named: dict[int, str], i: int) -> bool:
    w, before = found[i], (found[i - 1] if i > 0 else "")
    nxt = found[i + 1] if i + 1 < len(found) else ""
    if w == "such":
        return nxt not in ("as", "a", "an") and bool(nxt)
    if before == "like" and (not nxt or nxt in _PRONOUN_FOLLOWERS):
        return True  # "places like this": a comparison with the speaker's here and now
    is_pronoun = not nxt or nxt in _PRONOUN_FOLLOWERS or nxt in _NOT_NOUNS
    if w == "that" and (before in _SAYING or named.get(i - 1, "gerund") != "gerund" or before in CLAUSE_WORDS) \
            and nxt and nxt not in _PRONOUN_FOLLOWERS:
        return False  # "says that jazz helps", "a dog that barks": a conjunction or a relative
    if is_pronoun:
        return not any(j < i and k != "gerund" for j, k in named.items())
    if nxt in TIMES:
        return False  # "this summer", "these days": relative to the entry's own date
    head = _head(found, i + 1)
    if {"called", "named"} & set(found[i + 1:i + 4]) or (head is not None and named.get(head) == "proper"):
        return False  # "this band called Muse", "this guy named Tom"
    noun = found[head] if head is not None else nxt
    return not any(j < i and (k == "proper" or found[j] == noun) for j, k in named.items())
