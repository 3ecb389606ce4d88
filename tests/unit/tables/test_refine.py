"""tables.refine: clusters are a function of the entries, not of their order; a split gives every piece the
source's evidence whole and a merge keeps the merge rule (no counter lost either way); discard archives;
protected entries are refused (hypothesis for the properties)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import permutations

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from credence.errors import DomainError
from credence.tables import refine
from credence.tables.entries import new_persona_entry, new_reflection
from credence.tables.evidence import Evidence, effective_disputation, effective_reinforcement
from credence.tables.lifecycle import merge_evidence
from credence.tables.scope import Scope
from credence.tables.statement import overlap

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
S = Scope("acme", "u1", "aria")


@st.composite
def evidence(draw) -> Evidence:
    return Evidence(
        reinforcement=draw(st.floats(-10, 10, allow_nan=False)),
        disputation=draw(st.floats(0, 10, allow_nan=False)),
        rein_last_signal_at=T0 - timedelta(days=draw(st.integers(0, 400))),
        disp_last_signal_at=T0 - timedelta(days=draw(st.integers(0, 400))),
        sub_zero_days=draw(st.integers(0, 20)),
        user_fact_reinforce_count=draw(st.integers(0, 9)),
    )


def _entry(i: int, ev: Evidence = Evidence(), text: str = "The user likes tea.", **kw):
    return new_persona_entry(f"p{i}", S, text, T0 - timedelta(days=i), evidence=ev, **kw)


def _read(ev: Evidence, at: datetime) -> tuple[float, float]:
    return (effective_reinforcement(ev, at), effective_disputation(ev, at))


# -- clusters -------------------------------------------------------------------------------------------

def _related(a, b) -> bool:
    x, y = int(a.id[1:]), int(b.id[1:])
    return x % 3 == y % 3 or x % 5 == y % 5


@examples(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), unique=True, max_size=14), st.randoms(use_true_random=False),
       st.integers(2, 6))
def test_clusters_are_the_same_whatever_the_order_and_keys_only_prune_pairs(ids, rng, size_max):
    entries = [_entry(i) for i in ids]
    shuffled = list(entries)
    rng.shuffle(shuffled)
    first = refine.clusters(entries, _related, size_max=size_max)
    assert refine.clusters(shuffled, _related, size_max=size_max) == first
    keyed = refine.clusters(shuffled, _related, size_max=size_max,
                            keys=lambda e: {f"a{int(e.id[1:]) % 3}", f"b{int(e.id[1:]) % 5}"})
    assert keyed == first  # the same pairs compared where it matters: keys only leave out unrelated pairs
    assert all(2 <= len(c) <= size_max for c in first)
    members = [e.id for c in first for e in c]
    assert len(members) == len(set(members))  # disjoint


_WORDS = st.frozensets(st.sampled_from("abcdefgh"), min_size=1, max_size=5)


@examples(max_examples=60, deadline=None)
@given(st.lists(_WORDS, max_size=12), st.sampled_from([0.3, 0.5, 0.6, 0.75, 1.0]))
def test_probing_by_rare_keys_finds_every_pair_that_shares_enough(words, share):
    """The restatement rule's shape: Jaccard at or above `share`, or one side inside the other."""
    entries = [_entry(i, text=" ".join(sorted(w))) for i, w in enumerate(words)]
    stems = {e.id: frozenset(e.text.split()) for e in entries}

    def related(a, b):
        j, contained = overlap(stems[a.id], stems[b.id])
        return j >= share or contained >= 1.0

    brute = refine.clusters(entries, related, size_max=6)
    assert refine.clusters(entries, related, size_max=6, keys=lambda e: stems[e.id], share=share) == brute


def test_a_lone_entry_is_no_cluster_and_a_big_one_is_cut_to_its_best_connected_members():
    hub = _entry(0, text="hub")
    spokes = [_entry(i, text=f"spoke {i}") for i in range(1, 9)]
    related = lambda a, b: "hub" in (a.text, b.text) or {a.id, b.id} == {"p1", "p2"}  # noqa: E731
    [cluster] = refine.clusters([hub, *spokes, _entry(99, text="alone")], related, size_max=3)
    assert [e.id for e in cluster] == ["p0", "p1", "p2"]


def test_cluster_hash_and_piece_ids_derive_from_their_inputs():
    assert refine.cluster_hash(["b", "a"]) == refine.cluster_hash(["a", "b"]) != refine.cluster_hash(["a", "c"])
    src = _entry(1)
    ids = {refine.piece_id(src, "k", a, p) for a in range(3) for p in range(3)}
    assert len(ids) == 9 and refine.piece_id(src, "k", 1, 2) == refine.piece_id(src, "k", 1, 2)
    assert refine.piece_id(src, "k", 0, 0) != refine.piece_id(src, "other", 0, 0)


# -- split: every piece carries the source's evidence whole ---------------------------------------------

@examples(max_examples=60, deadline=None)
@given(evidence(), st.integers(2, 4), st.integers(0, 400))
def test_a_split_loses_no_counter_and_merging_the_pieces_back_gives_the_source(ev, n, later):
    source = replace(_entry(1, ev), source_fact_ids=("f1", "f2"), importance=7)
    texts = [f"The user likes thing {i}." for i in range(n)]
    ids = [refine.piece_id(source, "k", 0, i) for i in range(n)]
    pieces, gone = refine.split(source, texts, ids, T0)
    assert [p.text for p in pieces] == texts and [p.id for p in pieces] == ids
    at = T0 + timedelta(days=later)
    for p in pieces:
        assert p.evidence == source.evidence  # counters, clocks, lifetime tallies: all of them
        assert _read(p.evidence, at) == _read(source.evidence, at)
        assert (p.kind, p.status, p.importance, p.source_fact_ids) == (source.kind, source.status, 7, ("f1", "f2"))
        assert p.valid_from == T0 and p.version == 1
        assert [(v.text, v.reason) for v in p.version_history] == [("The user likes tea.", "refine_split")]
    back, _ = refine.merge(pieces, "The user likes things.", T0 + timedelta(days=later))
    assert _read(back.evidence, at) == pytest.approx(_read(source.evidence, at))
    assert back.evidence.sub_zero_days == ev.sub_zero_days
    assert back.evidence.user_fact_reinforce_count == ev.user_fact_reinforce_count
    assert gone.status == "archived" and gone.archived_at == T0 and gone.id == source.id  # kept, not deleted


def test_a_split_needs_two_texts_each_with_its_own_id():
    with pytest.raises(DomainError):
        refine.split(_entry(1), ["The user likes tea."], ["x"], T0)
    with pytest.raises(DomainError):
        refine.split(_entry(1), ["a", "b"], ["x", "x"], T0)


# -- merge: the merge rule, folded, in any order ---------------------------------------------------------

@examples(max_examples=60, deadline=None)
@given(st.lists(evidence(), min_size=2, max_size=4), st.integers(0, 400))
def test_a_merge_keeps_every_counter_by_the_merge_rule_in_any_order(evs, later):
    sources = [_entry(i, ev, source_fact_ids=(f"f{i}",)) for i, ev in enumerate(evs)]
    merged, gone = refine.merge(sources, "The user likes tea a lot.", T0)
    folded = evs[0]
    for ev in evs[1:]:
        folded = merge_evidence(folded, ev, T0)
    assert merged.evidence == folded
    at = T0 + timedelta(days=later)
    # never more than the larger side, never younger; lifetime tallies the larger, never summed, never lost
    assert _read(merged.evidence, at)[0] == pytest.approx(max(effective_reinforcement(e, at) for e in evs))
    assert _read(merged.evidence, at)[1] == pytest.approx(max(effective_disputation(e, at) for e in evs))
    assert merged.evidence.sub_zero_days == max(e.sub_zero_days for e in evs)
    assert merged.evidence.user_fact_reinforce_count == max(e.user_fact_reinforce_count for e in evs)
    assert merged.id == "p0" and merged.text == "The user likes tea a lot."
    assert merged.merged_from_ids == tuple(s.id for s in sources[1:])
    assert set(merged.source_fact_ids) == {f"f{i}" for i in range(len(evs))}
    assert [(v.text, v.reason) for v in merged.version_history][-1] == ("The user likes tea.", "refine_merge")
    assert len(merged.version_history) == min(len(evs), 5)  # every source's text, bounded
    assert [g.merged_into_id for g in gone] == ["p0"] * (len(evs) - 1)
    assert all(g.status == "archived" for g in gone)
    for order in permutations(sources[1:]):
        assert refine.merge([sources[0], *order], "x", T0)[0].evidence == pytest.approx(merged.evidence)


def test_modify_keeps_id_and_counters_and_discard_archives():
    ev = Evidence(reinforcement=1.5, disputation=0.5, rein_last_signal_at=T0, disp_last_signal_at=T0)
    entry = _entry(1, ev)
    modified = refine.modify(entry, "The user likes green tea.", T0 + timedelta(hours=1))
    assert (modified.id, modified.evidence, modified.text) == (entry.id, ev, "The user likes green tea.")
    assert [(v.text, v.reason) for v in modified.version_history] == [("The user likes tea.", "refine_modify")]
    gone = refine.discard(new_reflection("r1", S, "The user said something.", T0), T0)
    assert gone.status == "archived" and gone.archived_at == T0


def test_protected_card_entries_are_never_refined():
    card = _entry(1, protected=True)
    for act in (lambda: refine.modify(card, "x", T0), lambda: refine.discard(card, T0),
                lambda: refine.split(card, ["a", "b"], ["x", "y"], T0),
                lambda: refine.merge([_entry(2), card], "x", T0)):
        with pytest.raises(DomainError, match="protected"):
            act()
