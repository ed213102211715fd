"""Records as the live model keeps them: compact, ordered, and found again by identity or by a hash of their id.

Only what the rules read is kept. A record no rule reads but through its time is a :class:`Stub`; a decision's text
is reduced to the configured phrases it matches (:func:`reduce_text`, which provably keeps every phrase match); the
ids of records let go stay as 8-byte hashes (:class:`IdHashes`).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
import re
from array import array
from collections.abc import Callable, Iterable
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple, TypeVar

from collectors.citations import Citation
from collectors.records import Event, Order


class Stub(NamedTuple):
    """A stored heartbeat record that is not a decision, as the model keeps it.

    No rule reads such a record but through its time when it is a state change (its kind says so); the model needs
    only its id (a later record with that id is dropped, spec 1.1), its read order (which of two records with one id
    comes first), its time (a rebuild for an earlier T hides it again) and its kind. A whole Event has 15 fields;
    many logs are mostly such records (progress notes, tool output, commits, finished runs).
    """

    id: str
    ts: datetime
    kind: str
    path: str
    line: int
    generation: int

    @property
    def order(self) -> Order:
        """The record's position in read order (spec section 1), as :attr:`Event.order`."""
        return (self.path, self.generation, self.line)


class Shape(NamedTuple):
    """The fields of a decision that many decisions share as a whole (:class:`Packed`): one tuple for them all."""

    text: str
    prompt: str | None
    reason: str | None
    alternatives: tuple[str, ...]
    subject: tuple[str, ...]
    corrects: str | None
    generation: int


class Source(NamedTuple):
    """Who wrote a decision, of what kind, where: what many decisions share as a whole (:class:`Packed`), one tuple
    for them all (about one an agent's log and kind; a Markdown file's decisions share theirs)."""

    agent: str
    kind: str
    path: str


#: The fields of a decision that many decisions share as a whole (:class:`Packed`), in this order.
SHAPE_FIELDS = Shape._fields
#: What :class:`Packed` holds in its own slots, in this order (``source`` the shared tuple of Source's fields,
#: ``shape`` that of SHAPE_FIELDS). Seven slots: a tuple of nine takes 16 bytes more (the allocator's steps are 16).
PACKED_LAYOUT = ("id", "ts", "source", "line", "thread", "citations", "shape")
_SOURCE = 2
_SHAPE = 6


#: A slot of a packed record as it is held (typed loosely: Event's annotations name its own layout).
_slot: Callable[[tuple[Any, ...], int], Any] = tuple.__getitem__


def _shared_field(held_in: str, name: str) -> property:
    # Read in C (the shared tuple's own field through the record's slot): the rules read these millions of times.
    return property(operator.attrgetter(f"{held_in}.{name}"), doc=f"As :class:`Event`'s {name}.")


class Packed(Event):
    """A decision as the live model holds it: an :class:`Event` in every field it reads, in 7 references instead of
    15. The fields no index reads and most decisions share as a whole (the text reduced to phrases, prompt, reason,
    alternatives, subject, corrects, generation: thousands of distinct combinations for a million decisions) are one
    shared tuple, and its agent, kind and path another, read through properties.

    As a tuple it holds :data:`PACKED_LAYOUT` (made by :func:`pack`, compared only with other packed records, pickled
    as that tuple); :meth:`_replace`, :meth:`_asdict` and ``repr`` answer as the Event it stands for.
    """

    __slots__ = ()

    # Its own layout's getters: the first two are where Event has them.
    source = property(operator.itemgetter(_SOURCE), doc="The shared :class:`Source` of this decision.")
    agent = _shared_field("source", "agent")
    kind = _shared_field("source", "kind")
    path = _shared_field("source", "path")
    line = property(operator.itemgetter(3), doc="As :class:`Event`'s line.")
    thread = property(operator.itemgetter(4), doc="As :class:`Event`'s thread.")
    citations = property(operator.itemgetter(5), doc="As :class:`Event`'s citations.")
    shape = property(operator.itemgetter(_SHAPE), doc="The shared :class:`Shape` of this decision.")
    text = _shared_field("shape", "text")
    prompt = _shared_field("shape", "prompt")
    reason = _shared_field("shape", "reason")
    alternatives = _shared_field("shape", "alternatives")
    subject = _shared_field("shape", "subject")
    corrects = _shared_field("shape", "corrects")
    generation = _shared_field("shape", "generation")

    @property
    def order(self) -> Order:
        """The record's position in read order (spec section 1), as :attr:`Event.order`."""
        return (_slot(self, _SOURCE)[2], _slot(self, _SHAPE)[6], _slot(self, 3) or 0)

    def event(self) -> Event:
        """The :class:`Event` this record stands for."""
        shape, source = _slot(self, _SHAPE), _slot(self, _SOURCE)
        return Event(_slot(self, 0), _slot(self, 1), source[0], source[1], source[2], _slot(self, 3), _slot(self, 4),
                     shape[0], _slot(self, 5), *shape[1:])

    def _replace(self, /, **changes: Any) -> Event:  # type: ignore[override]
        return self.event()._replace(**changes)

    def _asdict(self) -> dict[str, Any]:
        return self.event()._asdict()

    def __repr__(self) -> str:
        return f"Packed({self.event()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple.__new__, (Packed, tuple(self))


def pack(record_id: str, ts: datetime, source: Source, line: int | None, thread: str | None,
         citations: tuple[Citation, ...], shape: Shape) -> Packed:
    """A packed record of these fields, ``source`` and ``shape`` holding its values of :class:`Source`'s fields and
    :data:`SHAPE_FIELDS` (shared by the caller)."""
    return tuple.__new__(Packed, (record_id, ts, source, line, thread, citations, shape))


#: What the model stores for a record: the event (a :class:`Packed` one), or the stub of a record no rule reads.
Record = Event | Stub

#: A record's time, and its read order: the keys of every sort and bisect of the model (C-level getters).
ts_of = attrgetter("ts")
order_of = attrgetter("order")

T = TypeVar("T")


class ById(dict[int, T]):
    """Objects by their identity (``id()``): where the model must find one record again, not any equal one. A map
    of its own type so that the model cache (daemon/modelcache.py) knows to write its values, not their addresses."""

    __slots__ = ()


class ByRecordId(dict[str, T]):
    """Visible winners by their record id, keyed by the record's own id string (no key object of its own, as an
    ``id()`` would be): for indexes of winners only, where an id names one record. Its own type so that the model
    cache writes its values alone and keys them again by their records' strings (not second copies)."""

    __slots__ = ()


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


def sorted_by_key(records: Iterable[Record]) -> list[Record]:
    """``records`` sorted by :func:`~scorers.lookups.sort_key` (time, then read order), without its key per record.

    ``sorted(key=sort_key)`` holds a (time, (path, generation, line)) pair for every record until it returns, and the
    pools it emptied stay with the process. Sorting by the records' own time objects allocates no key; only the runs
    of equal times are then sorted by read order (the sort is stable either way).
    """
    out = sorted(records, key=ts_of)
    times = list(map(ts_of, out))
    same = list(map(operator.eq, times, itertools.islice(times, 1, None)))  # same[k]: out[k] and out[k + 1] tie
    del times
    end = -1
    for k in itertools.compress(itertools.count(), same):
        if k < end:
            continue  # inside the run already sorted
        end = k + 1
        while end < len(same) and same[end]:
            end += 1
        out[k:end + 1] = sorted(out[k:end + 1], key=order_of)
    return out


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
        alternation = "|".join(re.escape(p) for p in self.phrases)
        self.pattern = re.compile(rf"(?<!\w)(?=({alternation})(?!\w))") if self.phrases else None
        # Any phrase anywhere, as plain text: a cheaper scan (no assertion at every position) that most texts, holding
        # no phrase at all, end with; a phrase matching somewhere is in the text there, so none is passed over.
        self.anywhere = re.compile(alternation) if self.phrases else None
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


def reduce_text(text: str, vocabulary: Vocabulary) -> str:
    """The lower-cased phrases of ``vocabulary`` that ``text`` matches, one per line.

    For every phrase ``q`` without a line break, ``matches(reduce_text(t), q) == matches(t, q)``: a phrase
    found in the reduction lies inside one matched phrase ``p`` (it cannot span a line break), and ``p`` sits
    in ``t`` between non-word characters, so ``q`` matches ``t`` at the same place. The caller passes only
    phrases without line breaks. Rules read text only through phrase matches, so they cannot tell the two apart.
    """
    return SEPARATOR.join(vocabulary.found(text))
