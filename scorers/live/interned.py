"""A table of distinct values, each held once and named by its position: what the model's columns hold positions into
(scorers/live/table.py), with no dict from value to position beside it."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

#: Entries of an :class:`Interned` index per value when it is made again, and the share past which it grows.
_ENTRIES, _GROW = 1.6, 0.75


class Interned:
    """Distinct values, each once, by their position (a column holds positions), found by an open-addressing index of
    positions keyed by the value's hash: four bytes an entry where a dict from value to position cost ~70 bytes a
    value (its entry, and the position as an int object)."""

    __slots__ = ("index", "values")

    def __init__(self, first: Sequence[Any] = ()) -> None:
        self.values: list[Any] = list(first)
        self._reindex(len(self.values))

    def _reindex(self, n: int) -> None:
        size = max(8, int(n * _ENTRIES))
        index = array("i", [-1]) * size
        # The values are distinct: each goes to the first free entry from its hash, none compared (a cache's read
        # makes every table's index again).
        for k, h in enumerate(map(hash, self.values)):
            i = h % size
            while index[i] != -1:
                i = i + 1 if i + 1 < size else 0
            index[i] = k
        self.index: array[int] = index

    def _probe(self, value: Any) -> tuple[int, int]:
        """(entry, position) of ``value``, or (the empty entry where it would go, -1)."""
        index, values = self.index, self.values
        size = len(index)
        i = hash(value) % size
        while True:
            k = index[i]
            if k == -1 or values[k] == value:
                return i, k
            i = i + 1 if i + 1 < size else 0

    def find(self, value: Any) -> int:
        """The position of ``value`` (-1: not held)."""
        return self._probe(value)[1]

    def __call__(self, value: Any) -> int:
        i, k = self._probe(value)
        if k == -1:
            k = self.index[i] = len(self.values)
            self.values.append(value)
            if len(self.values) > _GROW * len(self.index):
                self._reindex(len(self.values) * 2)
        return k

    def __getstate__(self) -> list[Any]:
        return self.values

    def __setstate__(self, values: list[Any]) -> None:
        self.values = values
        self._reindex(len(values))

    def __len__(self) -> int:
        return len(self.values)

    def kept(self, positions: Iterable[int]) -> Interned:
        """The values at ``positions`` only (ascending): the k-th of them at position k."""
        values = self.values
        return Interned([values[k] for k in positions])
