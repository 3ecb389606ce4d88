"""The shared self-containment gate and the lexical near-duplicate rule (tables/statement.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credence.tables.statement import REASONS, is_self_contained, overlap, restates, words

GOOD = [
    "The user likes coffee.",
    "The user's name is Erin.",
    "The user is learning French with a tutor.",
    "The user lives in Montreal.",
    "The user has two dogs and loves them.",
    "The user owns a bike and rides it to work.",
    "The user moved to Lisbon and loves it there.",
    "The user adopted a cat named Miso and adores her.",
    "The user visits her grandmother every Sunday.",
    "The user says they are no longer vegan.",
    "The user says they no longer eat meat.",
    "The user finds it hard to wake up early.",
    "The user says that jazz helps them focus.",
    "The user has a dog that barks at squirrels.",
    "The user loves checking out new parks with their four pups.",
    "The user works as a nurse.",
    "The user loves U2.",
    "La usuaria ya no come carne.",
    "The user lives in the US.",
    "The user enjoys what they do for a living.",
    "The user prefers hiking on weekends.",
    "The user is a fan of the Beatles.",
    "The user stopped drinking coffee.",
    "Der Nutzer mag Kaffee.",
    "La usuaria es alérgica a los cacahuetes.",
    "The user thinks there is too much traffic in Berlin.",
    "The user's sister visits her often.",
    # A referent named in the statement, or a demonstrative the statement resolves itself.
    "The user is moving to Berlin this summer.",
    "The user has loved Radiohead since school and saw this band live twice.",
    "The user met this guy named Tom at work.",
    "The user loves hiking and does it every weekend.",
    "The user loves it when it rains.",
    "The user has a garden and spends hours there every weekend.",
    "The user loves how books take them to other places.",
    "The user's bakery opens at 5am.",
    "The user loves Lisbon - it reminds them of home.",
]

# The refusals on real speech, by language: pointing words, demonstratives, cut-offs.
REAL_SPEECH = [
    ("The user loves going to this park near their house.", "dangling_reference"),
    ("The user likes to come to this spot by the water.", "dangling_reference"),
    ("The user loves being in places like this.", "dangling_reference"),
    ("The user loves making him happy.", "dangling_reference"),
    ("The user loves how they take them to other places.", "dangling_reference"),
    ("The user loves working on it to chill out.", "dangling_reference"),
    ("The user wants to go there.", "dangling_reference"),
    ("The user knows that.", "dangling_reference"),
    ("The user likes this band.", "dangling_reference"),
    ("The user is not a fan of the heat there.", "dangling_reference"),
    ("The user says he is their whole world.", "dangling_reference"),
    ("The user loves going to the park near their house -.", "cut_off"),
    ("The user loves being in Lisbon - it brings.", "cut_off"),
    ("The user loves to take a look at the sunset-.", "cut_off"),
    ("The user goes hiking with their friends \u2014", "cut_off"),
    ("The user enjoys what they do.", "empty_complement"),
    ("The user knows what it is.", "empty_complement"),
]
BY_LANGUAGE = {
    "de": (["Der Nutzer mag Kaffee.", "Der Nutzer hat einen Hund und liebt ihn.", "Der Nutzer mag Köln sehr.",
            "Der Nutzer findet es schwer, früh aufzustehen.", "Der Nutzer zieht diesen Sommer nach Berlin."],
           [("Der Nutzer mag es.", "dangling_reference"), ("Der Nutzer wohnt dort.", "dangling_reference"),
            ("Der Nutzer liebt diesen Park.", "dangling_reference"), ("Der Nutzer mag das.", "dangling_reference"),
            ("Der Nutzer geht jeden Morgen mit ihm raus.", "dangling_reference"),
            ("Der Nutzer mag Kaffee und", "cut_off"), ("Der Nutzer wohnt in Köln -", "cut_off")]),
    "es": (["El usuario vive en Madrid.", "El usuario tiene un perro y lo pasea cada mañana.",
            "A la usuaria le encanta el café.", "El usuario se muda a Lima este verano."],
           [("El usuario vive allí.", "dangling_reference"), ("El usuario lo odia.", "dangling_reference"),
            ("El usuario ama este parque.", "dangling_reference"), ("El usuario quiere verlo pronto.",
                                                                    "dangling_reference"),
            ("Al usuario le encanta esto.", "dangling_reference"), ("El usuario vive en Madrid y", "cut_off"),
            ("El usuario disfruta lo que hace.", "empty_complement")]),
    "fr": (["L'utilisateur aime le café.", "L'utilisatrice a un chat et l'adore.",
            "L'utilisatrice joue du piano le soir.", "L'utilisateur déménage à Paris cet été."],
           [("L'utilisateur l'adore.", "dangling_reference"), ("L'utilisateur aime ce parc.", "dangling_reference"),
            ("L'utilisateur y va souvent.", "dangling_reference"), ("L'utilisateur aime ça.", "dangling_reference"),
            ("L'utilisateur habite là-bas.", "dangling_reference"), ("L'utilisateur aime le café et", "cut_off"),
            ("L'utilisateur aime mon chien.", "first_person"), ("L'utilisateur aime ton sourire.", "about_character"),
            ("L'utilisateur aime ce qu'il fait.", "empty_complement")]),
}

BAD = [
    ("", "empty"),
    ("   ", "empty"),
    ("The user.", "empty"),
    ("The user loves them and how much joy they bring me.", "first_person"),
    ("The user loves your commitment.", "about_character"),
    ("The user enjoys what I do.", "first_person"),
    ("The user loves checking out new parks with my four pups.", "first_person"),
    ("The user loves trying out new recipes and experimenting in the.", "cut_off"),
    ("The user loves them.", "dangling_reference"),
    ("The user loves it.", "dangling_reference"),
    ("The user really loves it so much.", "dangling_reference"),
    ("The user likes that.", "dangling_reference"),
    ("The user hates this.", "dangling_reference"),
    ("The user loves those.", "dangling_reference"),
    ("The user has been there.", "dangling_reference"),
    ("The user likes it here.", "dangling_reference"),
    ("The user loves him.", "dangling_reference"),
    ("The user misses her.", "dangling_reference"),
    ("The user is learning it.", "dangling_reference"),
    ("The user walks them every morning.", "dangling_reference"),
    ("The user loves this song.", "dangling_reference"),
    ("The user likes you.", "about_character"),
    ("The user thinks the AI is funny.", "about_character"),
    ("The user and I went hiking.", "first_person"),
    ("The user's dog is my best friend.", "first_person"),
    ("We love sushi.", "first_person"),
    ("The user is learning French with.", "cut_off"),
    ("The user likes coffee and", "cut_off"),
    ("The user likes coffee,", "cut_off"),
    ("The user likes coffee...", "cut_off"),
    ("The user likes coffee (black", "unbalanced"),
    ('The user likes "Dune', "unbalanced"),
    ("Der Nutzer liebt meine Katze.", "first_person"),
    ("La usuaria quiere a tu perro.", "about_character"),
    ("The user loves what you do.", "about_character"),
]


@pytest.mark.parametrize("text", GOOD)
def test_self_contained_statements_pass(text):
    assert is_self_contained(text) == (True, "")


@pytest.mark.parametrize("text,reason", BAD + REAL_SPEECH)
def test_statements_a_reader_cannot_use_alone_are_refused_with_their_reason(text, reason):
    assert is_self_contained(text) == (False, reason)
    assert reason in REASONS


@pytest.mark.parametrize("lang", sorted(BY_LANGUAGE))
def test_each_language_gets_its_pointing_words_demonstratives_and_cut_offs_judged(lang):
    good, bad = BY_LANGUAGE[lang]
    assert [t for t in good if is_self_contained(t) != (True, "")] == []
    assert [(t, is_self_contained(t)[1]) for t, _ in bad] == bad


PERSONAL = {"i", "me", "my", "mine", "myself", "we", "our", "ours", "ourselves",
            "you", "your", "yours", "yourself", "yourselves"}


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_never_raises_and_what_it_accepts_has_no_first_or_second_person(text):
    ok, reason = is_self_contained(text)
    assert (ok and reason == "") or (not ok and reason in REASONS)
    if ok:
        assert not PERSONAL & set(re.findall(r"[^\W\d_]+", text.casefold()))


_PRONOUNS = st.sampled_from(["I", "my", "me", "you", "your", "we", "our", "You", "MY", "I'm", "you're"])
_FILL = st.lists(st.sampled_from(["The", "user", "likes", "coffee", "in", "Paris", "with", "friends"]), max_size=6)


@settings(max_examples=200, deadline=None)
@given(_FILL, _PRONOUNS, _FILL)
def test_a_first_or_second_person_word_anywhere_is_refused(head, pronoun, tail):
    ok, _ = is_self_contained(" ".join([*head, pronoun, *tail]) + ".")
    assert not ok


def test_words_split_contractions_and_casefold():
    assert words("I'm Émile’s") == ["i", "m", "émile", "s"]


def test_overlap_and_restates():
    a, b = frozenset({"@learn", "learning", "french"}), frozenset({"@learn", "learning", "french", "tutor"})
    assert overlap(a, b) == (0.75, 1.0)
    assert overlap(a, frozenset()) == (0.0, 0.0)
    assert restates(a, b, True, jaccard=0.6, containment_min=2)
    assert not restates(a, b, False, jaccard=0.6, containment_min=2)  # "likes" vs "does not like"
    coffee, shop = frozenset({"coffee"}), frozenset({"coffee", "shop"})
    assert not restates(coffee, shop, True, jaccard=0.6, containment_min=2)  # one shared word is not enough


@settings(max_examples=200, deadline=None)
@given(st.frozensets(st.text(max_size=3), max_size=6), st.frozensets(st.text(max_size=3), max_size=6))
def test_restates_is_symmetric_and_reflexive(a, b):
    assert restates(a, b, True, jaccard=0.6, containment_min=2) == restates(b, a, True, jaccard=0.6,
                                                                            containment_min=2)
    if a:
        assert restates(a, a, True, jaccard=0.6, containment_min=2)
