"""Record ids held in columns, and found by id: no Python string per id held.

:class:`Ids` holds an id per slot as a stem and a number, or as UTF-8 bytes in one buffer; :class:`IdIndex` is an
open-addressing table from an id to its slot, keyed by the id's CRC-32, that stores no key of its own (it reads the id
from the :class:`Ids`); :class:`Texts` numbers distinct strings with the two.
"""

from __future__ import annotations

import math
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator

#: In :attr:`Ids.at`: the slot holds no id (its record let go; the slot is given again).
FREE = 0xFFFF_FFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: Stems held at most (see :class:`Ids`): ids of many distinct stems (random ones ending in a digit) go to the buffer.
STEMS_HELD = 4096
#: The most digits a number after a stem has (below 2**32 and never FREE).
_DIGITS = 9


class Ids:
    """Ids by slot, with no Python object per id: most as a stem and a number, the others as UTF-8 bytes in one buffer.

    An id that is a stem and then a decimal number (``vic7-4241``: an agent's name and a count, the usual shape) is
    held as the stem's position (``stem``, two bytes; the stems held once each) and the number (``at``): six bytes in
    place of its text. Any other id has stem 0, and ``at`` is where its length (a varint) and then its bytes lie in
    ``blob``. A slot let go leaves its bytes behind until they are half of the buffer; then the buffer is written again
    without them (slots keep their numbers)."""

    __slots__ = ("_stem_at", "_stem_bytes", "at", "blob", "garbage", "stem", "stems")

    def __init__(self) -> None:
        self.at: array[int] = array("I")
        self.stem: array[int] = array("H")
        self.blob = bytearray()
        #: Bytes of ``blob`` no slot names any more.
        self.garbage = 0
        #: The stems by position (0: none, the id is in the buffer).
        self.stems: list[str] = [""]
        self._index_stems()

    def _index_stems(self) -> None:
        self._stem_at = {s: k for k, s in enumerate(self.stems) if k}
        self._stem_bytes = [s.encode() for s in self.stems]

    def __getstate__(self) -> tuple[array[int], array[int], bytearray, int, list[str]]:
        return self.at, self.stem, self.blob, self.garbage, self.stems

    def __setstate__(self, state: tuple[array[int], array[int], bytearray, int, list[str]]) -> None:
        self.at, self.stem, self.blob, self.garbage, self.stems = state
        self._index_stems()

    def _split(self, text: str) -> tuple[int, int]:
        """(stem's position, number) for an id held without its text, or (0, 0)."""
        stem = text.rstrip("0123456789")
        digits = len(text) - len(stem)
        if not stem or not 0 < digits <= _DIGITS or (digits > 1 and text[len(stem)] == "0"):
            return 0, 0
        k = self._stem_at.get(stem)
        if k is None:
            if len(self.stems) >= STEMS_HELD:
                return 0, 0
            k = self._stem_at[stem] = len(self.stems)
            self.stems.append(stem)
            self._stem_bytes.append(stem.encode())
        return k, int(text[len(stem):])

    def put(self, slot: int, text: str) -> None:
        """Hold ``text`` as the id of ``slot`` (the next slot, or one let go)."""
        stem, at = self._split(text)
        if not stem:
            data = text.encode()
            at = len(self.blob)
            self.blob += _varint(len(data))
            self.blob += data
        if slot == len(self.at):
            self.at.append(at)
            self.stem.append(stem)
        else:
            self.at[slot], self.stem[slot] = at, stem

    def live(self, slot: int) -> bool:
        """True when ``slot`` holds an id."""
        return 0 <= slot < len(self.at) and self.at[slot] != FREE

    def release(self, slot: int) -> None:
        """Let go of the id of ``slot``."""
        at = self.at[slot]
        self.at[slot] = FREE
        if self.stem[slot]:
            self.stem[slot] = 0
            return
        self.garbage += self._span(at)[1] - at
        if self.garbage > 4096 and self.garbage * 2 > len(self.blob):
            self._compact()

    def _compact(self) -> None:
        blob, out, starts, stems = self.blob, bytearray(), self.at, self.stem
        for slot in range(len(starts)):
            at = starts[slot]
            if at != FREE and not stems[slot]:
                starts[slot] = len(out)
                out += blob[at:self._span(at)[1]]
        self.blob, self.garbage = out, 0

    def _span(self, at: int) -> tuple[int, int]:
        """Where the id stored at ``at`` starts and ends in ``blob`` (past its length)."""
        blob = self.blob
        n, shift = 0, 0
        while True:
            b = blob[at]
            at += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return at, at + n
            shift += 7

    def bytes_of(self, slot: int) -> bytes:
        """The UTF-8 bytes of the id of ``slot``."""
        at, stem = self.at[slot], self.stem[slot]
        if stem:
            return b"%b%d" % (self._stem_bytes[stem], at)
        blob = self.blob
        n = blob[at]
        if n < 0x80:  # the common case: an id shorter than 128 bytes
            return bytes(blob[at + 1:at + 1 + n])
        start, end = self._span(at)
        return bytes(blob[start:end])

    def text(self, slot: int) -> str:
        """The id of ``slot``."""
        stem = self.stem[slot]
        if stem:
            return f"{self.stems[stem]}{self.at[slot]}"
        return self.bytes_of(slot).decode()


#: In :attr:`IdIndex.slots`: no slot.
EMPTY = -1
#: The share of an :class:`IdIndex`'s entries used when it is made (or grown) for a number of ids.
FILL = 0.6
#: The share past which it grows (by half: half of the new size used).
GROW = 0.75


class IdIndex:
    """The slot of each id held in ``ids``: an open-addressing table (linear probing) keyed by the CRC-32 of the id's
    bytes, with a byte of that CRC beside each entry so that most probes compare no id. About 5 bytes a table entry.
    Made for :data:`FILL` of its entries used, it grows by half once more than :data:`GROW` are: any size, not a
    power of two (a million ids made for in a power of two would take up to twice the entries they need).
    (For the table's records: the slot winning each id, spec 1.1.)"""

    __slots__ = ("count", "ids", "size", "slots", "tags")
    #: The share of entries used when made for a number of ids, and past which it grows (see :class:`SparseIdIndex`).
    fill, grow = FILL, GROW

    def __init__(self, ids: Ids, expected: int = 0) -> None:
        self.ids = ids
        self._allocate(max(8, math.ceil(expected / self.fill)))

    def _allocate(self, size: int) -> None:
        self.slots: array[int] = array("i", [EMPTY]) * size
        self.tags = bytearray(size)
        self.size = size
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def _find(self, key: bytes, h: int = -1) -> tuple[int, int]:
        """(entry, slot) of ``key`` (``h``: its CRC-32, when known), or (the empty entry where it would go, EMPTY)."""
        if h < 0:
            h = zlib.crc32(key)
        tag, size, slots, tags, id_bytes = h >> 24, self.size, self.slots, self.tags, self.ids.bytes_of
        i = h % size
        while True:
            slot = slots[i]
            if slot == EMPTY:
                return i, EMPTY
            if tags[i] == tag and id_bytes(slot) == key:
                return i, slot
            i += 1
            if i == size:
                i = 0

    def get(self, record_id: str) -> int:
        """The slot winning ``record_id`` (EMPTY: none)."""
        key = record_id.encode()
        if self.slots[zlib.crc32(key) % self.size] == EMPTY:
            return EMPTY  # a miss at the first entry, without the search's call (most of a sparse index's misses)
        return self._find(key)[1]

    def __contains__(self, record_id: str) -> bool:
        return self.get(record_id) != EMPTY

    def put(self, record_id: str, slot: int) -> None:
        """``slot`` wins ``record_id`` now (in place of the slot that did, if any)."""
        key = record_id.encode()
        i, old = self._find(key)
        if old == EMPTY:
            self._take(i, key, slot)
        else:
            self.slots[i] = slot

    def claim_all(self, slots: Iterable[int]) -> list[tuple[int, int]]:
        """Each of ``slots`` in order wins the id it holds unless a slot does already (one search, no string made, no
        call per record: a rebuild asks it of a million): (slot, the slot winning its id) for each that found its id
        won already."""
        ids, crc32 = self.ids, zlib.crc32
        stem_at, number, stem_bytes, id_bytes = ids.stem, ids.at, ids._stem_bytes, ids.bytes_of
        table, tags, size = self.slots, self.tags, self.size
        room = int(self.grow * size) - self.count  # inserts before the table must grow
        found = []
        for slot in slots:
            stem = stem_at[slot]
            key = b"%b%d" % (stem_bytes[stem], number[slot]) if stem else id_bytes(slot)
            h = crc32(key)
            tag, i = h >> 24, h % size
            while True:
                w = table[i]
                if w == EMPTY:
                    table[i], tags[i] = slot, tag
                    room -= 1
                    if room < 0:  # (the growth counts the table's entries afresh)
                        self._grow()
                        table, tags, size = self.slots, self.tags, self.size
                        room = int(self.grow * size) - self.count
                    break
                if tags[i] == tag and id_bytes(w) == key:
                    found.append((slot, w))
                    break
                i += 1
                if i == size:
                    i = 0
        self.count = int(self.grow * size) - room  # counted from the room left, not at each insert
        return found

    def _take(self, i: int, key: bytes, slot: int) -> None:
        """``slot`` wins ``key`` at the empty entry ``i``."""
        self._take_tagged(i, zlib.crc32(key) >> 24, slot)

    def _take_tagged(self, i: int, tag: int, slot: int) -> None:
        self.slots[i] = slot
        self.tags[i] = tag
        self.count += 1
        if self.count > self.grow * self.size:
            self._grow()

    def get_or_append(self, text: str) -> int:
        """The slot winning the id ``text``; when none does, ``text`` is appended to :attr:`ids` (the next slot) and
        wins. One hash and one search, where a :meth:`get` and a :meth:`put` take two of each (:class:`Texts`)."""
        key = text.encode()
        h = zlib.crc32(key)
        i, slot = self._find(key, h)
        if slot == EMPTY:
            slot = len(self.ids.at)
            self.ids.put(slot, text)
            self._take_tagged(i, h >> 24, slot)
        return slot

    def remove(self, record_id: str) -> None:
        """No slot wins ``record_id`` any more (backward-shift deletion: no tombstones)."""
        i, old = self._find(record_id.encode())
        if old == EMPTY:
            return
        slots, tags, size, id_bytes = self.slots, self.tags, self.size, self.ids.bytes_of
        self.count -= 1
        j = i
        while True:
            j = j + 1 if j + 1 < size else 0
            slot = slots[j]
            if slot == EMPTY:
                break
            home = zlib.crc32(id_bytes(slot)) % size
            # The entry at j may move to i when its home is not cyclically within (i, j].
            if (j > i and (home <= i or home > j)) or (j < i and home <= i and home > j):
                slots[i], tags[i] = slot, tags[j]
                i = j
        slots[i] = EMPTY
        tags[i] = 0

    def _grow(self) -> None:
        old = [s for s in self.slots if s != EMPTY]
        self._allocate(self.size * 3 // 2)
        self._put_all(old)

    def _put_all(self, slots: Iterable[int]) -> None:
        id_bytes, table, tags, size = self.ids.bytes_of, self.slots, self.tags, self.size
        for slot in slots:
            key = id_bytes(slot)
            h = zlib.crc32(key)
            i = h % size
            while table[i] != EMPTY:
                i = i + 1 if i + 1 < size else 0
            table[i], tags[i] = slot, h >> 24
            self.count += 1

    def values(self) -> Iterator[int]:
        """Every slot winning an id, in no particular order."""
        return (s for s in self.slots if s != EMPTY)


class SparseIdIndex(IdIndex):
    """An :class:`IdIndex` kept at most 40 % full, for ids asked about far more often than held: a miss probes ~2
    entries where one 60-75 % full probes ~3-9 (every decision's rules ask whether it has a label; one in eight has)."""

    __slots__ = ()
    fill, grow = 0.3, 0.4


#: Strings a :class:`Texts` remembers it holds (a value is most often asked for again soon after).
RECENT_HELD = 4096


class Texts:
    """Distinct strings, each once, by position (0 stands for None): held as :class:`Ids` and found by an
    :class:`IdIndex`, with no Python object per string (a record's thread: tens of thousands, each a few records').

    The strings asked for lately are remembered (found without hashing their bytes): the last :data:`RECENT_HELD`, or
    every one from :meth:`remember_all` to :meth:`forget_recent`. A store's records are read in time order, every
    agent's threads interleaved, so a load would find almost none of them among the last few thousand."""

    __slots__ = ("_held", "_recent", "ids", "index")

    def __init__(self) -> None:
        self.ids = Ids()
        self.ids.put(0, "")  # position 0: None, never found by its text
        self.index = IdIndex(self.ids)
        self._recent: dict[str, int] = {}
        self._held = RECENT_HELD

    def __getstate__(self) -> tuple[Ids, IdIndex]:
        return self.ids, self.index

    def __setstate__(self, state: tuple[Ids, IdIndex]) -> None:
        self.ids, self.index = state
        self._recent, self._held = {}, RECENT_HELD

    def remember_all(self) -> None:
        """Remember every string asked for until :meth:`forget_recent` (a load's)."""
        self._held = sys.maxsize

    def forget_recent(self) -> None:
        """Let go of the strings remembered; remember the last :data:`RECENT_HELD` from now on."""
        self._recent, self._held = {}, RECENT_HELD

    def __len__(self) -> int:
        return len(self.ids.at)

    def __call__(self, text: str) -> int:
        """The position of ``text`` (made when new)."""
        recent = self._recent
        k = recent.get(text)
        if k is not None:
            return k
        k = self.index.get_or_append(text)
        if len(recent) >= self._held:
            recent.clear()
        recent[text] = k
        return k

    def find(self, text: str) -> int:
        """The position of ``text`` (EMPTY: not held)."""
        k = self._recent.get(text)
        return self.index.get(text) if k is None else k

    def kept(self, positions: Iterable[int]) -> Texts:
        """Texts of the strings at ``positions`` only (ascending, 0 first): the k-th of them at position k."""
        kept = Texts()
        for k in positions:
            if k:
                kept(self.ids.text(k))
        kept.forget_recent()
        return kept

    def text(self, k: int) -> str | None:
        """The string at position ``k`` (None at 0)."""
        return self.ids.text(k) if k else None

    @property
    def values(self) -> list[str | None]:
        """Every string by position (made now: for a test or a dump)."""
        return [self.text(k) for k in range(len(self))]
