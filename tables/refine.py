"""Refinement: clusters of near-duplicate or overlapping live entries, and what a refine answer does to them.

The origin (N.E.K.O.'s refinement loops) refines on a timer: clusters of similar entries go to a model that answers
split / merge / modify / discard (or nothing). Its ids are salted with the wall clock and its splits divide
the counters (a reflection's split or merge even drops disputation). Here every function is pure, time is a
parameter, ids derive from the inputs, and the evidence rules are these:

- **merge** keeps the merge rule every merge in credence follows (tables.lifecycle.merge_evidence,
  docs/pipeline.md's "Merged evidence keeps its age"): per counter the larger read-time side, never the sum,
  never younger; lifetime tallies the larger. Folded over the sources one at a time, in the cluster's order;
  the rule is commutative, so the order does not change the result.
- **split** gives every piece the source's evidence whole (counters, clocks and lifetime tallies): the user's
  signals were about everything the entry said, so each part stands exactly as supported and as disputed as
  the whole did, at every later instant. Nothing is divided, so nothing is lost (a confirmed observation
  does not fall to pending by being reworded into two), and merging the pieces back gives the source's
  evidence again (the merge rule of equal sides is that side).
- **modify** rewrites the text in place: id and counters kept.
- **discard** archives the entry (never deletes it).

The modification history is the entry's version history (tables.version_history, bounded by
memory.version_history_max): a modify appends the text it replaced; a merge appends the survivor's old
text and every other source's; each split piece inherits the source's history plus the source's text.

Protected (character-card) entries never take part: they are left out of every cluster and refused here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from credence.config.memory import DEFAULT_MEMORY_SETTINGS, MemorySettings
from credence.errors import DomainError
from credence.tables.clock import as_utc
from credence.tables.entries import Entry, changed, rewrite_text
from credence.tables.lifecycle import archive, merge_evidence
from credence.tables.version_history import Version, appended

SPLIT = "split"
MERGE = "merge"
MODIFY = "modify"
DISCARD = "discard"
ACTIONS = (SPLIT, MERGE, MODIFY, DISCARD)
# Version-history reasons (tables.version_history: readers show them as they are).
REFINE_SPLIT = "refine_split"
REFINE_MERGE = "refine_merge"
REFINE_MODIFY = "refine_modify"


def clusters(entries: Sequence[Entry], related: Callable[[Entry, Entry], bool], *, size_max: int,
             keys: Callable[[Entry], Iterable[str]] | None = None, share: float = 0.0,
             pairs: Iterable[tuple[str, str]] = ()) -> list[list[Entry]]:
    """Connected components of ``related`` among ``entries`` with two members or more, each cut to the
    ``size_max`` members with the most relations inside it (then by id), members ordered by id and the
    clusters by their first member's id: the same entries give the same clusters in any order.

    ``keys`` (optional) are what two related entries must share, at least a ``share`` of the smaller
    side's keys (content stems: the restatement rule's Jaccard threshold, or 0 for "one"). Then only
    candidate pairs are compared (prefix filtering: each entry probes with its rarest keys, enough that a
    pair sharing that much always meets in one), so a scope of thousands of entries is not compared pair
    by pair. ``pairs`` (ids) are compared besides them: candidates found another way (embeddings)."""
    ordered = sorted(entries, key=lambda e: e.id)
    parent = {e.id: e.id for e in ordered}
    degree = dict.fromkeys(parent, 0)

    def root(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in _candidate_pairs(ordered, keys, share, pairs):
        if related(a, b):
            degree[a.id] += 1
            degree[b.id] += 1
            ra, rb = root(a.id), root(b.id)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[Entry]] = {}
    for e in ordered:
        groups.setdefault(root(e.id), []).append(e)
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        kept = sorted(members, key=lambda e: (-degree[e.id], e.id))[:size_max]
        out.append(sorted(kept, key=lambda e: e.id))
    return sorted(out, key=lambda c: c[0].id)


def _candidate_pairs(ordered: list[Entry], keys: Callable[[Entry], Iterable[str]] | None, share: float,
                     extra: Iterable[tuple[str, str]] = ()):
    at = {e.id: n for n, e in enumerate(ordered)}
    seen: set[tuple[int, int]] = set()
    for x, y in extra:
        if x in at and y in at and x != y:
            pair = (min(at[x], at[y]), max(at[x], at[y]))
            if pair not in seen:
                seen.add(pair)
                yield ordered[pair[0]], ordered[pair[1]]
    if keys is None:
        for i, a in enumerate(ordered):
            for j in range(i + 1, len(ordered)):
                if (i, j) not in seen:
                    yield a, ordered[j]
        return
    sets = [frozenset(keys(e)) for e in ordered]
    index: dict[str, list[int]] = {}
    for i, ks in enumerate(sets):
        for k in ks:
            index.setdefault(k, []).append(i)
    for i, ks in enumerate(sets):
        # Two sets sharing at least `share` of the smaller one's keys (at least one key): the smaller set
        # misses at most floor(n * (1 - share)) of its keys in the other, so its rarest that-many-plus-one
        # keys hold a shared one. Probing with them finds every such pair from its smaller side.
        rare = sorted(ks, key=lambda k: (len(index[k]), k))
        for k in rare[:int(len(rare) * (1 - share) + 1e-9) + 1]:
            for j in index[k]:
                pair = (min(i, j), max(i, j))
                if i != j and pair not in seen:
                    seen.add(pair)
                    yield ordered[pair[0]], ordered[pair[1]]


def cluster_hash(ids: Iterable[str]) -> str:
    """The cluster's identity: its sorted member ids. Any change of membership (a merge, a split, a new
    entry) is a new cluster, looked at again."""
    return hashlib.sha256("|".join(sorted(ids)).encode()).hexdigest()[:16]


def piece_id(source: Entry, key: str, action_index: int, piece_index: int) -> str:
    """A split piece's id, derived from its inputs: the source, the decision (``key``: the cluster's hash)
    and its place in the answer, so a replay writes the same pieces and two pieces never collide."""
    raw = "\x1f".join([source.scope, source.id, key, str(action_index), str(piece_index)])
    return "refined-" + hashlib.sha256(raw.encode()).hexdigest()[:16]


def _refinable(entry: Entry) -> None:
    if entry.protected:
        raise DomainError(f"{entry.id} is a protected character-card entry; refinement never touches it")


def split(source: Entry, texts: Sequence[str], ids: Sequence[str], now: datetime, *,
          settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> tuple[list[Entry], Entry]:
    """The pieces (one per text, ids given) and the source archived. Each piece carries the source's
    evidence whole (the split rule, above), its kind, status, subject, importance and sources, and the
    source's text in its history; it is a new meaning from ``now`` (valid_from), with no AI mentions of its
    own yet."""
    _refinable(source)
    if len(texts) < 2 or len(texts) != len(ids) or len(set(ids)) != len(ids):
        raise DomainError(f"a split of {source.id} needs two texts or more, one distinct id each")
    now = as_utc(now)
    history = appended(source.version_history, Version(source.text, now, REFINE_SPLIT),
                       settings.version_history_max)
    pieces = [replace(source, id=i, text=t, version=1, updated_at=now, valid_from=now, invalidated_at=None,
                      recent_mentions=(), suppressed_at=None, merged_from_ids=(), merged_into_id=None,
                      version_history=history)
              for i, t in zip(ids, texts)]
    return pieces, archive(source, now)


def merge(sources: Sequence[Entry], text: str, now: datetime, *,
          settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> tuple[Entry, list[Entry]]:
    """One entry from ``sources``: the first (the caller's survivor) keeps its id and takes ``text``; the
    others' evidence folds into it by the merge rule, their sources and ids join it (merged_from_ids), and
    they are archived with merged_into_id set to it."""
    if len(sources) < 2 or len({s.id for s in sources}) != len(sources):
        raise DomainError("a merge needs two distinct entries or more")
    survivor, others = sources[0], sources[1:]
    for s in sources:
        _refinable(s)
        if s.scope != survivor.scope:
            raise DomainError(f"cannot merge {s.id} into {survivor.id}: evidence never crosses scopes")
    evidence, facts, merged_from = survivor.evidence, list(survivor.source_fact_ids), list(survivor.merged_from_ids)
    history = survivor.version_history
    text = (text or survivor.text).strip()
    for other in others:
        evidence = merge_evidence(evidence, other.evidence, now, settings=settings)
        facts += [f for f in other.source_fact_ids if f not in facts]
        merged_from += [other.id] if other.id not in merged_from else []
        history = appended(history, Version(other.text, now, REFINE_MERGE), settings.version_history_max)
    if text != survivor.text:
        history = appended(history, Version(survivor.text, now, REFINE_MERGE), settings.version_history_max)
    merged = changed(survivor, now, text=text, evidence=evidence, source_fact_ids=tuple(facts),
                     merged_from_ids=tuple(merged_from), importance=max(s.importance for s in sources),
                     version_history=history)
    gone = [replace(archive(o, now), merged_into_id=survivor.id) for o in others]
    return merged, gone


def modify(entry: Entry, text: str, now: datetime, *, settings: MemorySettings = DEFAULT_MEMORY_SETTINGS) -> Entry:
    """The text rewritten in place: id and every counter kept, the old text in its version history."""
    _refinable(entry)
    return rewrite_text(entry, text, now, reason=REFINE_MODIFY, settings=settings)


def discard(entry: Entry, now: datetime) -> Entry:
    """Out of the active view into the archive, never deleted."""
    _refinable(entry)
    return archive(entry, now)
