"""What makes a stored memory usable: a statement about the user that a reader understands alone, and
when two statements say the same thing.

``is_self_contained`` is the one gate both Stage-1 paths and reflection synthesis pass through before a text
becomes a fact or an entry; it refuses with a reason (empty, first_person, about_character, unbalanced,
empty_complement, cut_off, dangling_reference). ``restates`` is the lexical near-duplicate rule on content
stems. Lexical rules: English in full, German, Spanish and French for person, pointing words and cut-offs.

The rules, each reason with its examples and the known limits: docs/design/statements.md.
"""

from __future__ import annotations

import re

from credence.tables import languages, referents
from credence.tables.memo import text_memo

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_ENGLISH_FIRST = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"})
_ENGLISH_SECOND = frozenset({"you", "your", "yours", "yourself", "yourselves"})
# An English statement may still carry a German or Spanish pronoun the speaker left in.
FIRST_PERSON = _ENGLISH_FIRST | (languages.GERMAN.first_person - {"uns"}) | (
    languages.SPANISH.first_person - {"me", "nos"})
SECOND_PERSON = _ENGLISH_SECOND | (languages.GERMAN.second_person - {"ihr"}) | (
    languages.SPANISH.second_person - {"os"})
_CHARACTER = re.compile(r"\b(?:the (?:ai|assistant|character|bot|chatbot)|der (?:KI|Assistent|Bot)|"
                        r"(?:la|el) (?:IA|asistente|bot)|l'(?:IA|assistant))\b", re.IGNORECASE)
_OPEN_ENDED = frozenset({
    "the", "a", "an", "my", "your", "their", "our", "its", "some", "every", "each", "of", "in", "on", "at",
    "to", "for", "with", "from", "by", "about", "into", "onto", "than", "and", "or", "but", "nor", "because",
    "if", "when", "while", "as", "whether", "very", "which", "whose", "is", "was", "be", "been", "being",
    "has", "had", "will", "would", "should", "such", "not", "no", "so", "like", "near", "how", "where",
    "who", "whom", "are", "were", "am", "can", "could", "since", "although", "though", "after", "before",
})
# A verb that needs its object: a statement ending on it after its subject was cut ("… - it brings.").
_NEEDS_OBJECT = frozenset({"brings", "makes", "gives", "puts", "gets", "takes", "keeps", "lets", "wants", "needs",
                           "likes", "loves", "enjoys", "hates", "prefers", "misses", "tells", "uses", "reminds",
                           "sends", "finds", "means", "feels", "is", "s", "has"})
_CUT_SUBJECT = frozenset({"it", "this", "that", "and", "user", "they", "he", "she", "which", "who", "s"})
_ADVERBS = frozenset({"really", "also", "always", "still", "often", "now", "never", "no", "longer", "just",
                      "not", "absolutely", "truly", "usually", "sometimes", "currently", "actually", "even",
                      "don", "doesn", "didn", "t", "says", "said", "thinks", "they", "she", "he"})
_AUX = frozenset({"is", "are", "was", "were", "has", "have", "had", "does", "do", "did", "will", "would", "can",
                  "could", "should", "am", "been", "being", "re", "ve"})
_PAIRS = (("(", ")"), ("[", "]"), ("{", "}"), ("\u201c", "\u201d"))
_CUT_PUNCTUATION = re.compile(r"(?:[,;:\-\u2013\u2014]|\.\.|\u2026)[\s.!?]*$")
# A dash between words as punctuation ("house - it", "sunset-.", "—"), not a hyphen inside a word.
_DASH = re.compile(r"\s[-\u2013\u2014]+\s|[\u2013\u2014]|--|(?<=\w)-(?=[\s.!?]|$)")

# Reasons, in the order they are checked; /metrics labels refusals with these.
REASONS = ("empty", "first_person", "about_character", "unbalanced", "empty_complement", "cut_off",
           "dangling_reference")


def words(text: str) -> list[str]:
    """The text's words, casefolded: runs of letters (apostrophes split "I'm" into "i", "m")."""
    return [w.casefold() for w in _WORD.findall(text)]


def is_self_contained(text: str) -> tuple[bool, str]:
    """(True, "") for a statement a reader understands alone; otherwise (False, one of REASONS)."""
    if not isinstance(text, str):
        return False, "empty"
    return _verdict(text)


# Pure, and asked about the same statement again and again: by Stage-1 and again when its fact is admitted,
# by every synthesis and correction that words it the same, by a replay of the same turns.
@text_memo(maxsize=1 << 14)
def _verdict(text: str) -> tuple[bool, str]:
    text = " ".join(text.translate(_APOSTROPHES).split())
    raw = _WORD.findall(text)
    found = [w.casefold() for w in raw]
    if not found or found in (["the", "user"], ["user"]):
        return False, "empty"
    lang = languages.language_of(found)
    spec = languages.LANGUAGES.get(lang)
    # Each language's own person words (French "du" is not German "du"); English ones count everywhere.
    first = (spec.first_person | _ENGLISH_FIRST) if spec else FIRST_PERSON
    second = (spec.second_person | _ENGLISH_SECOND) if spec else SECOND_PERSON
    # "US" (the country) is not "us"; every other casing is the pronoun.
    if any(w in first and not (w == "us" and r == "US") for w, r in zip(found, raw)):
        return False, "first_person"
    if any(w in second for w in found) or _CHARACTER.search(text):
        return False, "about_character"
    if not _balanced(text):
        return False, "unbalanced"
    if referents.empty_complement(found) if lang == "en" else languages.empty_complement(found, lang):
        return False, "empty_complement"
    if _cut_off(text, found, spec.open_ended if spec else _OPEN_ENDED):
        return False, "cut_off"
    if referents.unresolved(raw, found, _verb_index(found)) if lang == "en" else \
            languages.unresolved(raw, found, lang):
        return False, "dangling_reference"
    return True, ""


def _balanced(text: str) -> bool:
    for open_, close in _PAIRS:
        if text.count(open_) != text.count(close):
            return False
    return text.count('"') % 2 == 0


def _cut_off(text: str, found: list[str], open_ended: frozenset[str]) -> bool:
    """Ends mid-clause: on punctuation that continues, an open word, a verb missing its object, or behind
    a dash that leaves less than a clause ("… near their house -.", "… like this - it brings.")."""
    last = re.findall(r"[\w']+", text)[-1]
    if _CUT_PUNCTUATION.search(text) or (found[-1] in open_ended and not any(c.isdigit() for c in last)):
        return True  # "5am" ends on a time, not on "am"
    if len(found) > 1 and found[-1] in _NEEDS_OBJECT and found[-2] in _CUT_SUBJECT:
        return True
    dashes = list(_DASH.finditer(text))
    if len(dashes) % 2 == 1:
        tail = words(text[dashes[-1].end():])
        return len(tail) < 3 or (tail[-1] in _NEEDS_OBJECT and tail[-2] in _CUT_SUBJECT)
    return False


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
        while i < len(found) and (found[i] in _ADVERBS or found[i] in _AUX):
            i += 1  # "has been playing": the verb after every auxiliary
        if i < len(found) and not found[i].endswith(("ing", "ed", "en")):
            return None
    return i if i < len(found) else None


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
