"""What makes a stored memory usable: a statement about the user that a reader understands alone, and
when two statements say the same thing.

``is_self_contained`` is the one gate both Stage-1 paths (the rules backend and a model) and reflection
synthesis pass through before a text becomes a fact or an entry. It refuses, with a reason:

- ``empty``: no words, or nothing said after the subject ("The user.");
- ``first_person``: I/me/my/we/our (and the German and Spanish forms) — the speaker's words left in;
- ``about_character``: you/your, or "the AI/assistant/character/bot" — a statement about the other side;
- ``dangling_reference``: it/them/him/this/that/these/those/there/here with nothing in the text to point
  at ("The user loves them."). "they/he/she" as a subject and "their/his/her" before a noun may stand for
  the user; "it" before "to"/"that" is the expletive ("finds it hard to wake up") and passes;
- ``cut_off``: ends on a determiner, preposition or conjunction, or on a comma or an ellipsis;
- ``unbalanced``: an opening bracket or quote without its close.

``restates`` is the lexical near-duplicate rule on content stems: the same polarity and either a Jaccard
overlap at or above a threshold, or one side's stems all inside the other's (when that side has at least
``containment_min`` of them, so one shared word is never enough).

The rules are lexical and English-first; other languages get their pronoun lists checked and nothing else.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

FIRST_PERSON = frozenset({
    "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves",
    "ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines", "wir", "unser", "unsere",
    "unseren", "unserem", "unserer", "yo", "mí", "mi", "mis", "conmigo", "nosotros", "nosotras", "nuestro",
    "nuestra", "nuestros", "nuestras",
})
SECOND_PERSON = frozenset({
    "you", "your", "yours", "yourself", "yourselves",
    "du", "dich", "dir", "dein", "deine", "deinen", "deinem", "deiner", "deines", "euch", "euer", "eure",
    "tú", "ti", "tu", "tus", "te", "contigo", "usted", "ustedes", "vosotros", "vosotras", "vuestro", "vuestra",
})
_CHARACTER = re.compile(r"\bthe (?:ai|assistant|character|bot|chatbot)\b", re.IGNORECASE)
# Words that need something earlier in the text to point at.
_NEEDS_ANTECEDENT = frozenset({"it", "its", "them", "him", "this", "that", "these", "those", "there", "here",
                               "itself", "such"})
# May stand for the user (singular they) as a subject or possessive; "her"/"him" as an object may not.
_MAY_BE_USER = frozenset({"they", "their", "theirs", "themselves", "he", "his", "she", "hers", "himself",
                          "herself"})
_OPEN_ENDED = frozenset({
    "the", "a", "an", "my", "your", "their", "our", "its", "some", "every", "each", "of", "in", "on", "at",
    "to", "for", "with", "from", "by", "about", "into", "onto", "than", "and", "or", "but", "nor", "because",
    "if", "when", "while", "as", "whether", "very", "which", "whose", "is", "was", "be", "been", "being",
    "has", "had", "will", "would", "should", "such", "not", "no",
})
# Function words and verbs of the predicate: never an antecedent.
_FUNCTION = _OPEN_ENDED | _NEEDS_ANTECEDENT | _MAY_BE_USER | frozenset({
    "her", "him", "these", "those", "any", "over", "under", "really", "who", "where", "are", "were", "have",
    "can", "could", "like",
    "user", "s", "t", "does", "do", "did", "says", "said", "thinks", "feels", "finds", "also", "always", "still",
    "often", "now", "never", "longer", "just", "so", "much", "how", "what", "that", "then", "too", "all",
    "likes", "loves", "enjoys", "hates", "dislikes", "prefers", "adores", "wants", "needs", "used",
    "mentions", "mentioned", "believes", "knows", "hopes", "wishes", "am", "one", "lot",
})
_ADVERBS = frozenset({"really", "also", "always", "still", "often", "now", "never", "no", "longer", "just",
                      "not", "absolutely", "truly", "usually", "sometimes", "currently", "actually", "even",
                      "don", "doesn", "didn", "t", "says", "said", "thinks", "they", "she", "he"})
_AUX = frozenset({"is", "are", "was", "were", "has", "have", "had", "does", "do", "did", "will", "would", "can",
                  "could", "should", "am", "been", "being", "re", "ve"})
_SAYING = frozenset({"says", "said", "thinks", "thought", "feels", "felt", "believes", "knows", "hopes",
                     "mentions", "mentioned", "wishes", "admits", "realises", "realizes", "finds", "notes"})
_EXISTENTIAL = frozenset({"is", "are", "was", "were", "has", "have", "had"})
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("\u201c", "\u201d"))
_CUT_PUNCTUATION = re.compile(r"(?:[,;:\-\u2013\u2014]|\.\.\.|\u2026)\s*$")

# Reasons, in the order they are checked; /metrics labels refusals with these.
REASONS = ("empty", "first_person", "about_character", "unbalanced", "cut_off", "dangling_reference")


def words(text: str) -> list[str]:
    """The text's words, casefolded: runs of letters (apostrophes split "I'm" into "i", "m")."""
    return [w.casefold() for w in _WORD.findall(text)]


def is_self_contained(text: str) -> tuple[bool, str]:
    """(True, "") for a statement a reader understands alone; otherwise (False, one of REASONS)."""
    if not isinstance(text, str):
        return False, "empty"
    text = " ".join(text.translate(_APOSTROPHES).split())
    raw = _WORD.findall(text)
    found = [w.casefold() for w in raw]
    if not found or found in (["the", "user"], ["user"]):
        return False, "empty"
    # "US" (the country) is not "us"; every other casing is the pronoun.
    if any(w in FIRST_PERSON and not (w == "us" and r == "US") for w, r in zip(found, raw)):
        return False, "first_person"
    if any(w in SECOND_PERSON for w in found) or _CHARACTER.search(text):
        return False, "about_character"
    if not _balanced(text):
        return False, "unbalanced"
    if _CUT_PUNCTUATION.search(text) or found[-1] in _OPEN_ENDED:
        return False, "cut_off"
    if _dangling(found):
        return False, "dangling_reference"
    return True, ""


def _balanced(text: str) -> bool:
    for open_, close in _PAIRS:
        if text.count(open_) != text.count(close):
            return False
    return text.count('"') % 2 == 0


def _dangling(found: list[str]) -> bool:
    verb = _verb_index(found)
    for i, word in enumerate(found):
        before, after = found[:i], found[i + 1] if i + 1 < len(found) else ""
        named = _antecedent(before, verb)
        if word in ("him", "her") and not _possessive_her(word, after) and not named:
            return True
        if word not in _NEEDS_ANTECEDENT or named:
            continue
        if word == "it" and {"to", "that"} & set(found[i + 1:i + 4]):
            continue  # the expletive "it": "finds it hard to wake up", "it is important to"
        if word == "that" and (not before or before[-1] in _SAYING or before[-1] not in _FUNCTION):
            continue  # "says that ...", "a dog that barks": a conjunction or a relative, not a pointer
        if word == "there" and after in _EXISTENTIAL:
            continue  # "there is a park nearby"
        return True
    return False


def _possessive_her(word: str, after: str) -> bool:
    return word == "her" and bool(after) and after not in _FUNCTION


def _verb_index(found: list[str]) -> int | None:
    """Where the predicate's verb is in "the user [adverbs] [aux] VERB ...": it names nothing, so it is
    never an antecedent ("The user loves them", "The user is learning it"). None when the subject is not
    "the user" or the predicate is an auxiliary with a noun phrase ("The user has two dogs")."""
    if found[:2] != ["the", "user"] or found[2:3] == ["s"]:
        return None
    i = 2
    while i < len(found) and found[i] in _ADVERBS:
        i += 1
    if i < len(found) and found[i] in _AUX:
        i += 1
        while i < len(found) and found[i] in _ADVERBS:
            i += 1
        if i < len(found) and not found[i].endswith(("ing", "ed", "en")):
            return None
    return i if i < len(found) else None


def _antecedent(before: list[str], verb: int | None) -> bool:
    """Something named earlier: a content word other than the predicate's verb."""
    return any(w not in _FUNCTION and len(w) > 1 and j != verb for j, w in enumerate(before))


def overlap(a: frozenset[str], b: frozenset[str]) -> tuple[float, float]:
    """(Jaccard, containment of the smaller set in the larger) of two stem sets; (0, 0) if either is empty."""
    if not a or not b:
        return 0.0, 0.0
    shared = len(a & b)
    return shared / len(a | b), shared / min(len(a), len(b))


def restates(a: frozenset[str], b: frozenset[str], same_polarity: bool, *, jaccard: float,
             containment_min: int) -> bool:
    """Whether two statements (as content stems) say the same thing by the lexical rule above."""
    if not same_polarity:
        return False
    j, contained = overlap(a, b)
    return j >= jaccard or (contained >= 1.0 and min(len(a), len(b)) >= containment_min)
