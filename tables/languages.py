"""The self-containment gate's word lists for German, Spanish and French (tables.statement): which
language a statement is in, its first- and second-person words, the words that point at something, and
the words a complete sentence does not end on.

The referent rule is the English one (tables.referents), kept lexical: a pointing word passes when a
noun is named before it (German: a capitalised word after the first; Spanish and French: a word after
an article or a capitalised one), so "Der Nutzer hat einen Hund und liebt ihn." passes and "Der Nutzer
mag es.", "El usuario vive allí.", "L'utilisateur y va souvent." do not.
"""

from __future__ import annotations

from dataclasses import dataclass

_SUBJECTS = {
    "de": (("der", "nutzer"), ("die", "nutzerin"), ("der", "benutzer"), ("die", "benutzerin")),
    "es": (("el", "usuario"), ("la", "usuaria"), ("al", "usuario"), ("a", "la")),
    "fr": (("l", "utilisateur"), ("l", "utilisatrice")),
}


@dataclass(frozen=True)
class Language:
    first_person: frozenset[str]
    second_person: frozenset[str]
    pointing: frozenset[str]  # need a noun named before them
    demonstratives: frozenset[str]  # determiners that need one too, unless a time follows
    clitics: frozenset[str]  # object pronouns only right after the subject or a negation
    open_ended: frozenset[str]  # a sentence does not end on these
    articles: frozenset[str]
    times: frozenset[str]
    experiencer: frozenset[str] = frozenset()  # "le encanta": the clitic is the user


GERMAN = Language(
    first_person=frozenset({"ich", "mich", "mir", "mein", "meine", "meinen", "meinem", "meiner", "meines", "wir",
                            "uns", "unser", "unsere", "unseren", "unserem", "unserer"}),
    second_person=frozenset({"du", "dich", "dir", "dein", "deine", "deinen", "deinem", "deiner", "deines", "euch",
                             "euer", "eure", "ihr"}),
    pointing=frozenset({"es", "ihn", "ihm", "ihnen", "dort", "dorthin", "hier", "dahin", "daran", "damit", "darauf",
                        "davon", "dafür", "darüber", "dies", "das", "dem"}),
    demonstratives=frozenset({"dieser", "diese", "dieses", "diesen", "diesem", "jener", "jene", "jenes", "jenen",
                              "solche", "solchen"}),
    clitics=frozenset(),
    open_ended=frozenset({"der", "die", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "und",
                          "oder", "aber", "weil", "dass", "mit", "in", "im", "an", "am", "auf", "für", "von", "vom",
                          "zu", "zum", "zur", "bei", "nach", "aus", "über", "unter", "wenn", "als", "sein",
                          "seine", "ihre", "denn", "ob"}),
    articles=frozenset({"der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "sein",
                        "seine", "seinen", "ihre", "ihren", "ihr"}),
    times=frozenset({"jahr", "woche", "wochenende", "sommer", "winter", "monat", "morgen", "abend", "tage", "tag",
                     "nacht", "zeit", "frühling", "herbst", "montag", "dienstag", "mittwoch", "donnerstag",
                     "freitag", "samstag", "sonntag", "woche", "wochen", "jahre", "monate"}),
)
SPANISH = Language(
    first_person=frozenset({"yo", "mí", "mi", "mis", "me", "conmigo", "nosotros", "nosotras", "nuestro", "nuestra",
                            "nuestros", "nuestras", "nos"}),
    second_person=frozenset({"tú", "ti", "tu", "tus", "te", "contigo", "usted", "ustedes", "vosotros", "vosotras",
                             "vuestro", "vuestra", "os"}),
    pointing=frozenset({"lo", "allí", "allá", "ahí", "aquí", "acá", "eso", "esto", "ello", "él"}),
    demonstratives=frozenset({"este", "esta", "estos", "estas", "ese", "esa", "esos", "esas", "aquel", "aquella",
                              "aquellos", "aquellas", "tal", "tales"}),
    clitics=frozenset({"la", "las", "los", "le", "les"}),
    open_ended=frozenset({"el", "la", "los", "las", "un", "una", "unos", "unas", "de", "del", "y", "o", "pero",
                          "porque", "con", "en", "a", "al", "para", "por", "muy", "que", "cuando", "si", "sin",
                          "su", "sus", "como"}),
    articles=frozenset({"el", "la", "los", "las", "un", "una", "unos", "unas", "su", "sus", "del", "al"}),
    times=frozenset({"año", "semana", "verano", "invierno", "mes", "fin", "mañana", "tarde", "noche", "días"}),
    experiencer=frozenset({"gusta", "gustan", "encanta", "encantan", "interesa", "interesan", "molesta",
                           "apasiona", "apasionan", "cuesta", "preocupa", "parece", "duele", "fascina", "fascinan"}),
)
FRENCH = Language(
    first_person=frozenset({"je", "j", "me", "m", "moi", "mon", "ma", "mes", "nous", "notre", "nos"}),
    second_person=frozenset({"tu", "te", "t", "toi", "ton", "ta", "tes", "vous", "votre", "vos"}),
    pointing=frozenset({"y", "là", "ici", "ça", "cela", "ceci", "lui", "bas"}),
    demonstratives=frozenset({"ce", "cet", "cette", "ces"}),
    clitics=frozenset({"le", "la", "les", "l", "en", "leur"}),
    open_ended=frozenset({"le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "et", "ou", "mais", "parce",
                          "avec", "à", "au", "aux", "en", "dans", "pour", "sur", "très", "que", "qui", "quand",
                          "si", "sans", "son", "sa", "ses", "leur", "leurs", "comme"}),
    articles=frozenset({"le", "la", "les", "l", "un", "une", "des", "du", "de", "d", "son", "sa", "ses", "leur",
                        "leurs", "au", "aux"}),
    times=frozenset({"année", "an", "semaine", "été", "hiver", "mois", "week", "matin", "soir", "jours"}),
)
LANGUAGES = {"de": GERMAN, "es": SPANISH, "fr": FRENCH}
_NEGATIONS = frozenset({"no", "ya", "nunca", "siempre", "también", "todavía", "aún", "ne", "n", "nicht"})


def language_of(found: list[str]) -> str:
    """"en", "de", "es" or "fr": by the statement's subject, else by its function words."""
    for lang, subjects in _SUBJECTS.items():
        if tuple(found[:2]) in subjects:
            return lang
    votes = {lang: sum(w in spec.articles or w in spec.open_ended for w in found) for lang, spec in LANGUAGES.items()}
    best = max(votes, key=lambda k: votes[k])
    english = sum(w in ("the", "a", "and", "is", "to", "of", "user", "likes", "loves") for w in found)
    return best if votes[best] > english + 1 else "en"


def unresolved(raw: list[str], found: list[str], lang: str) -> bool:
    """Whether a pointing word points at no noun named before it (German, Spanish, French)."""
    spec = LANGUAGES[lang]
    subject_end = 2 if any(tuple(found[:2]) == s for s in _SUBJECTS.get(lang, ())) else 0
    for i, w in enumerate(found):
        before, nxt = (found[i - 1] if i else ""), (found[i + 1] if i + 1 < len(found) else "")
        if lang == "de" and w == "es" and any(x in ("zu", "dass", "wenn") or (len(x) > 6 and "zu" in x[2:-2])
                                              for x in found[i + 1:]):
            continue  # "findet es schwer, früh aufzustehen": the expletive
        if lang == "de" and w in ("das", "dem") and nxt and raw[i + 1][:1].isupper():
            continue  # an article before its noun
        if lang == "es" and w == "lo" and nxt == "que":
            continue  # "lo que": a free relative, judged as an empty complement elsewhere
        if lang == "fr" and w == "y" and before == "il":
            continue  # "il y a"
        clitic = w in spec.clitics and (i == subject_end or before in _NEGATIONS) and i > 0
        if clitic and nxt in spec.experiencer:
            continue  # "le encanta": the user
        enclitic = lang == "es" and i > subject_end and before not in spec.articles and _enclitic(w)
        pointing = w in spec.pointing or clitic or enclitic
        if w in spec.demonstratives and nxt not in spec.times:
            pointing = True
        if pointing and i >= subject_end and not _named_before(raw, found, i, subject_end, spec):
            return True
    return False


def _enclitic(word: str) -> bool:
    """"verlo", "visitarla", "quererlos": an infinitive with its object pronoun."""
    return len(word) >= 5 and word.endswith(("rlo", "rla", "rlos", "rlas", "rle", "rles", "ndolo", "ndola"))


def _named_before(raw: list[str], found: list[str], i: int, subject_end: int, spec: Language) -> bool:
    for j in range(subject_end, i):
        if j > 0 and raw[j][:1].isupper() and found[j] not in spec.articles and found[j] not in spec.times:
            return True
        if found[j] in spec.articles and j + 1 < i and found[j + 1] not in spec.pointing | spec.clitics:
            return True
    return False


def empty_complement(found: list[str], lang: str) -> bool:
    """"disfruta lo que hace", "aime ce qu'il fait", "mag, was er macht": nothing said."""
    tail = " ".join(found[-4:])
    return (lang == "es" and " lo que " in f" {tail} " and len(found) - found.index("lo") <= 4) or (
        lang == "fr" and " ce qu" in f" {tail}" and len(found) - found.index("ce") <= 5) or (
        lang == "de" and " was " in f" {tail} " and len(found) - found.index("was") <= 3)
