"""Record ids held as bytes, and found by id: no Python string per id held.

:class:`Ids` holds an id per slot as UTF-8 bytes in one buffer; :class:`IdIndex` is an open-addressing table from an
id to its slot, keyed by the id's CRC-32, that stores no key of its own (it reads the id from the :class:`Ids`).
"""

from __future__ import annotations

import math
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


class Ids:
    """Ids by slot, as UTF-8 bytes in one buffer: each slot's start (``at``), where its length (a varint) and then its
    bytes lie. A slot let go leaves its bytes behind until they are half of the buffer; then the buffer is written
    again without them (slots keep their numbers)."""

    __slots__ = ("at", "blob", "garbage")

    def __init__(self) -> None:
        self.at: array[int] = array("I")
        self.blob = bytearray()
        #: Bytes of ``blob`` no slot names any more.
        self.garbage = 0

    def put(self, slot: int, text: str) -> None:
        """Hold ``text`` as the id of ``slot`` (the next slot, or one let go)."""
        data = text.encode()
        at = len(self.blob)
        self.blob += _varint(len(data))
        self.blob += data
        if slot == len(self.at):
            self.at.append(at)
        else:
            self.at[slot] = at

    def live(self, slot: int) -> bool:
        """True when ``slot`` holds an id."""
        return 0 <= slot < len(self.at) and self.at[slot] != FREE

    def release(self, slot: int) -> None:
        """Let go of the id of ``slot``."""
        at = self.at[slot]
        self.garbage += self._span(at)[1] - at
        self.at[slot] = FREE
        if self.garbage > 4096 and self.garbage * 2 > len(self.blob):
            self._compact()

    def _compact(self) -> None:
        blob, out, starts = self.blob, bytearray(), self.at
        for slot in range(len(starts)):
            at = starts[slot]
            if at != FREE:
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
        at, blob = self.at[slot], self.blob
        n = blob[at]
        if n < 0x80:  # the common case: an id shorter than 128 bytes
            return bytes(blob[at + 1:at + 1 + n])
        start, end = self._span(at)
        return bytes(blob[start:end])

    def text(self, slot: int) -> str:
        """The id of ``slot``."""
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

    def __init__(self, ids: Ids, expected: int = 0) -> None:
        self.ids = ids
        self._allocate(max(8, math.ceil(expected / FILL)))

    def _allocate(self, size: int) -> None:
        self.slots: array[int] = array("i", [EMPTY]) * size
        self.tags = bytearray(size)
        self.size = size
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def _find(self, key: bytes) -> tuple[int, int]:
        """(entry, slot) of ``key``, or (the empty entry where it would go, EMPTY)."""
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
        return self._find(record_id.encode())[1]

    def __contains__(self, record_id: str) -> bool:
        return self._find(record_id.encode())[1] != EMPTY

    def put(self, record_id: str, slot: int) -> None:
        """``slot`` wins ``record_id`` now (in place of the slot that did, if any)."""
        key = record_id.encode()
        i, old = self._find(key)
        self.slots[i] = slot
        if old == EMPTY:
            self.tags[i] = zlib.crc32(key) >> 24
            self.count += 1
            if self.count > GROW * self.size:
                self._grow()

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
