"""What the live model keeps of a record's text and of the ids it let go.

A decision's text is reduced to the configured phrases it matches (:func:`reduce_text`, which provably keeps every
phrase match); the ids of records let go stay as 8-byte hashes (:class:`IdHashes`) until the daemon moves them to its
store. The records themselves are columns (scorers/live/table.py).
"""

from __future__ import annotations

import bisect
import hashlib
import re
from array import array
from collections.abc import Iterable
from typing import Any


def id_hash(record_id: str) -> int:
    """A stable 64-bit hash of a record id (Python's own ``hash`` of a string changes from process to process)."""
    return int.from_bytes(hashlib.blake2b(record_id.encode(), digest_size=8).digest(), "big", signed=True)


class IdHashes:
    """The ids of the records the model let go, as 64-bit hashes: 8 bytes an id, in sorted machine-integer arrays
    bucketed by the top 12 bits (an insert moves a few kilobytes, a lookup bisects one small array). A hash found
    here may belong to another id; the caller asks the store, which holds every record, what it really is. The
    daemon moves them on to its store (migration 013) once written there (:meth:`hashes`, :meth:`discard`).
    """

    __slots__ = ("buckets", "count")

    def __init__(self) -> None:
        self.buckets: dict[int, array[int]] = {}
        self.count = 0

    def add(self, record_id: str) -> None:
        """Note the hash of one id (once)."""
        h = id_hash(record_id)
        bucket = self.buckets.get(h >> 52)
        if bucket is None:
            bucket = self.buckets[h >> 52] = array("q")
        i = bisect.bisect_left(bucket, h)
        if i == len(bucket) or bucket[i] != h:
            bucket.insert(i, h)
            self.count += 1

    def hashes(self) -> list[int]:
        """Every hash noted, in no particular order."""
        return [h for bucket in self.buckets.values() for h in bucket]

    def discard(self, hashes: Iterable[int]) -> None:
        """Forget these hashes (those not noted are passed over): they are kept elsewhere now."""
        for h in hashes:
            bucket = self.buckets.get(h >> 52)
            if bucket is None:
                continue
            i = bisect.bisect_left(bucket, h)
            if i < len(bucket) and bucket[i] == h:
                del bucket[i]
                self.count -= 1
                if not bucket:
                    del self.buckets[h >> 52]

    def might_hold(self, record_id: str) -> bool:
        """True if the hash of ``record_id`` was noted (by it, or by another id with the same hash)."""
        h = id_hash(record_id)
        bucket = self.buckets.get(h >> 52)
        if bucket is None:
            return False
        i = bisect.bisect_left(bucket, h)
        return i < len(bucket) and bucket[i] == h


_WORD = re.compile(r"\w")
#: Between the phrases of a reduced text; a phrase holding it keeps texts whole (see :func:`reduce_text`).
SEPARATOR = "\n"


class Vocabulary:
    """The phrases the rules ask about, with one combined pattern that finds every match in one pass."""

    def __init__(self, phrases_: Iterable[str]) -> None:
        self.phrases = tuple(sorted({p.lower() for p in phrases_ if p}, key=lambda p: (-len(p), p)))
        # At each position, the longest phrase that matches there (the lookahead makes every position count, so
        # phrases starting inside another match are found too); a shorter phrase matching at the same position is
        # a prefix of the longest one, checked by hand from ``prefixes``.
        longest = _any_of(self.phrases, longest=True)
        self.pattern = re.compile(rf"(?<!\w)(?=({longest})(?!\w))") if self.phrases else None
        # Any phrase anywhere, as plain text: a cheaper scan (no assertion at every position) that most texts, holding
        # no phrase at all, end with; a phrase matching somewhere is in the text there, so none is passed over.
        self.anywhere = re.compile(_any_of(self.phrases)) if self.phrases else None
        self.prefixes = {p: [q for q in self.phrases if q != p and p.startswith(q)] for p in self.phrases}

    def found(self, text: str) -> list[str]:
        """The phrases that match ``text`` (the spec's rule: lower-cased, no word character on either side)."""
        if self.pattern is None or self.anywhere is None or not text:
            return []
        lowered = text.lower()
        if self.anywhere.search(lowered) is None:
            return []
        found: set[str] = set()
        for m in self.pattern.finditer(lowered):
            p = m.group(1)
            found.add(p)
            start = m.start()
            for q in self.prefixes[p]:
                end = start + len(q)
                if end == len(lowered) or _WORD.match(lowered, end) is None:
                    found.add(q)
        return sorted(found)


def _any_of(words: Iterable[str], *, longest: bool = False) -> str:
    """A pattern matching wherever one of ``words`` starts, as a trie: at each position of a text one branch per next
    character is tried, where an alternation of the words tries each word (a million texts are scanned in a load:
    twice as fast on the default phrases). It matches the shortest word starting there, or with ``longest`` the
    longest first, the shorter ones on backtracking (as an alternation of the words longest first)."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}  # a word ends here

    def branch(node: dict[str, Any]) -> str:
        out = []
        while True:
            ends, rest = "" in node, sorted(ch for ch in node if ch)
            if not rest or (ends and not longest):
                break
            if len(rest) == 1 and not ends:  # (a long phrase is a loop here, not a recursion)
                out.append(re.escape(rest[0]))
                node = node[rest[0]]
                continue
            alternatives = [re.escape(ch) + branch(node[ch]) for ch in rest] + ([""] if ends else [])
            out.append(f"(?:{'|'.join(alternatives)})")
            break
        return "".join(out)

    return branch(trie)


def reduce_text(text: str, vocabulary: Vocabulary) -> str:
    """The lower-cased phrases of ``vocabulary`` that ``text`` matches, one per line.

    For every phrase ``q`` without a line break, ``matches(reduce_text(t), q) == matches(t, q)``: a phrase
    found in the reduction lies inside one matched phrase ``p`` (it cannot span a line break), and ``p`` sits
    in ``t`` between non-word characters, so ``q`` matches ``t`` at the same place. The caller passes only
    phrases without line breaks. Rules read text only through phrase matches, so they cannot tell the two apart.
    """
    return SEPARATOR.join(vocabulary.found(text))
