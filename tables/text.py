"""Lexical primitives the scope steps and the rules backend share: normalising a key phrase, content-word
stems, and the negation cues that give a sentence its polarity."""

from __future__ import annotations

import re

from credence.tables.memo import text_memo

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

# Leading words that never carry the subject ("my dog" and "a dog" are both about "dog").
_LEADING = {
    "a", "an", "the", "my", "our", "some", "any", "this", "that", "these", "those",
    "in", "at", "to", "for", "with", "on", "of", "about", "learning", "studying",
}
_TRAILING = {
    "anymore", "any more", "now", "too", "also", "lately", "either", "nowadays",
    "a lot", "so much", "very much", "really", "at all", "these days",
    # chat filler: "i love ramen so much lol", "i live in Lisbon btw"
    "lol", "haha", "lmao", "tbh", "ngl", "btw", "tho", "though", "honestly", "obviously", "rn", "idk", "fr",
}
_STOPWORDS = {
    "a", "an", "the", "my", "our", "your", "i", "i'm", "im", "me", "you", "it", "is", "am", "are",
    "was", "were", "be", "to", "of", "in", "on", "at", "for", "with", "and", "or", "but", "so",
    "that", "this", "do", "does", "did", "don't", "not", "no", "yes", "user", "user's", "really",
    "very", "just", "have", "has", "had", "like", "likes", "love", "loves", "prefer", "prefers",
    "about", "what", "which", "who", "we", "they", "he", "she", "his", "her", "their", "its",
    "would", "will", "can", "can't", "should", "there", "here", "than", "then", "also", "too",
    "as", "any", "some", "all", "more", "much", "now", "anymore", "longer", "lives", "live", "works", "work",
}
# Stems a rebuttal or a forget request is made of, not what it is about ("No, that's wrong, forget it").
REBUTTAL_WORDS = frozenset({
    "nope", "nah", "wrong", "true", "false", "incorrect", "quite", "actually", "never", "said", "say", "thank",
    "thanks", "sorry", "that", "that's", "this", "what", "please", "forget", "remember", "told", "tell", "anything",
    "everything", "stop", "delete", "mean", "meant", "well", "okay", "ok", "oh", "hmm", "sure", "not", "at",
    "nein", "falsch", "verdad", "told", "i'm", "i've", "isn't", "wasn't", "doesn't", "don't", "didn't", "mistake",
})
_NEGATION_CUES = re.compile(
    r"\b(?:not|no longer|never|don't|doesn't|didn't|isn't|aren't|wasn't|dislikes?|hates?|detests?|"
    r"can't stand|cannot stand|stopped|quit|gave up)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[\w']+", re.UNICODE)
# A clause also ends at a dash used as punctuation ("near my house - i go there", "the sunset- its our
# thing", "—") and at chat filler that starts an aside ("... lol i go every day").
_CLAUSE_END = re.compile(
    r",|;|:|\(|\s(?:because|but|since|though|although|when|while|which|and i|and i'm|so)\s|"
    r"\sand (?:she|he|they|it|we|you)\s|"
    r"\s[-\u2013\u2014]+(?:\s|$)|[\u2013\u2014]|--|(?<=\w)-(?=\s|$)|"
    r"\s(?:lol|haha|lmao|tbh|ngl|btw|idk|tho|rn)\b",
    re.IGNORECASE,
)


def clean(text: str) -> str:
    return " ".join(text.translate(_APOSTROPHES).split())


def cut_clause(phrase: str) -> str:
    """The object phrase up to the first clause boundary ("coffee, but only in the morning" -> "coffee")."""
    match = _CLAUSE_END.search(phrase)
    return (phrase[: match.start()] if match else phrase).strip(" .!?\"'")


def strip_fillers(phrase: str) -> str:
    """Drop trailing filler ("coffee anymore" -> "coffee"), keeping the phrase's case."""
    words = phrase.split()
    changed = True
    while words and changed:
        changed = False
        for filler in _TRAILING:
            size = len(filler.split())
            if len(words) > size and " ".join(words[-size:]).lower() == filler:
                words = words[:-size]
                changed = True
    return " ".join(words)


@text_memo(maxsize=1 << 16)  # pure, and asked about the same subjects for every fact of a scope
def normalise_subject(phrase: str) -> str:
    """Lowercase key phrase without leading determiners/prepositions or trailing filler."""
    words = strip_fillers(cut_clause(clean(phrase))).lower().split()
    while len(words) > 1 and words[0] in _LEADING:
        words = words[1:]
    return " ".join(w.strip(".,!?\"'") for w in words)


def stem(word: str) -> str:
    """Enough stemming to match "cats" with "cat" and "hates" with "hate"; nothing cleverer."""
    word = word.lower().strip("'")
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    return word


@text_memo(maxsize=1 << 16)  # pure; frozen, as every caller shares the one answer
def content_stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(clean(text).lower()) if w not in _STOPWORDS and len(w) > 1)


@text_memo(maxsize=1 << 16)  # pure; asked of every entry a correction or synthesis compares against
def polarity_of(text: str) -> str:
    return "negative" if _NEGATION_CUES.search(clean(text)) else "positive"


# The predicate's kind, kept beside the content stems when two statements are compared: "lives in
# Montreal" and "likes Montreal" share every content stem yet say different things.
_PREDICATES = (
    ("@like", re.compile(r"\b(?:likes?|lov(?:es?|ing)|enjoys?|adores?|prefers?|fan of|into|hates?|dislikes?|"
                         r"detests?|loathes?|can't stand|cannot stand)\b", re.IGNORECASE)),
    ("@live", re.compile(r"\b(?:lives?|living|moved|home)\b", re.IGNORECASE)),
    ("@work", re.compile(r"\b(?:works?|job|occupation|profession)\b", re.IGNORECASE)),
    ("@have", re.compile(r"\b(?:has|have|owns?|got)\b", re.IGNORECASE)),
    ("@name", re.compile(r"\b(?:name|named|called)\b", re.IGNORECASE)),
)


@text_memo(maxsize=1 << 16)  # pure; the same texts are compared on every synthesis and promotion
def restatement_stems(text: str) -> frozenset[str]:
    """Content stems plus the predicate's kind: what two statements are compared on for "says the same"."""
    marks = set()
    for mark, pattern in _PREDICATES:
        text, found = pattern.subn(" ", text)  # "enjoys" and "loves" are one predicate, not content
        if found:
            marks.add(mark)
    return content_stems(text) | frozenset(marks)
