"""Tenant-defined tags: a turn may carry them (`metadata.tags`), and the entries made from its
facts inherit them. Tags are the tenant's labels, never read by the evidence math; bounded so a hostile or
careless producer cannot grow a scope's state or the archive's rows without limit."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from credence.errors import DomainError

MAX_TURN_TAGS: Final = 16  # tags one turn may carry
MAX_ENTRY_TAGS: Final = 32  # tags an entry keeps (the union of its turns', first come first kept)
MAX_TAG_CHARS: Final = 64


def check_tag(tag: object) -> str:
    """One tag: a non-empty string of at most MAX_TAG_CHARS printable characters, not padded with spaces."""
    if not isinstance(tag, str) or not tag:
        raise DomainError(f"a tag must be a non-empty string, got {str(tag)[:40]!r}")
    if len(tag) > MAX_TAG_CHARS:
        raise DomainError(f"a tag is at most {MAX_TAG_CHARS} characters, got {len(tag)}")
    if not tag.isprintable() or tag != tag.strip():
        raise DomainError(f"a tag holds printable characters only, without surrounding spaces: {tag[:40]!r}")
    return tag


def check_tags(tags: object) -> tuple[str, ...]:
    """A turn's tags: a list of at most MAX_TURN_TAGS valid tags; duplicates kept once, in order."""
    if not isinstance(tags, list):
        raise DomainError(f"tags must be a list of strings, got {type(tags).__name__}")
    if len(tags) > MAX_TURN_TAGS:
        raise DomainError(f"at most {MAX_TURN_TAGS} tags per turn, got {len(tags)}")
    return tuple(dict.fromkeys(check_tag(t) for t in tags))


def union(*groups: Iterable[str]) -> tuple[str, ...]:
    """The tags of every group, each once, in first-seen order, at most MAX_ENTRY_TAGS (the first kept:
    an entry's tags never change order or lose one as more turns add theirs)."""
    out = dict.fromkeys(t for group in groups for t in group)
    return tuple(out)[:MAX_ENTRY_TAGS]
