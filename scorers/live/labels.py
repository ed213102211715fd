"""Labels as the live model holds them: columns of machine integers, no object per label nor per labelled id.

A label is a slot of :class:`HeldLabels`: its time and line number as integers, its value, reviewer, file and
generation as one index into a small table of the combinations seen (a few reviewers write into a few files), and its
decision as an index into the decision ids labels name, each held once as bytes (scorers/live/ids.py's
:class:`~scorers.live.ids.Ids`, found by an :class:`~scorers.live.ids.IdIndex`). The rare note goes in a map of its
own. Beside each decision id, the slots of its visible labels (what the model files as :data:`Held`: the slot itself
while there is one, as on most decisions); a :class:`~collectors.records.Label` is made again only where one is asked
for: the labels on one decision, a reviewer's current ``down`` label.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator

from collectors.records import Label
from collectors.rfc3339 import from_us, to_us
from scorers.live.ids import EMPTY, Ids, SparseIdIndex
from scorers.lookups import current_labels, down_labels

#: A decision's labels as the model files them: one slot, or several in arrival order (a tuple while few).
Held = int | tuple[int, ...] | list[int]
#: What a label holds beside its time, line, decision and note: (value, reviewer, path, generation).
Kind = tuple[str, str, str, int]
#: Labels on one decision id held as a tuple of slots up to this many, then as a list.
FEW_LABELS = 8
#: In :attr:`HeldLabels.one`: the decision has no visible label, or several (then in :attr:`HeldLabels.several`).
NONE, SEVERAL = -1, -2


def slots_of(held: Held) -> Iterable[int]:
    """The slots of a decision's labels, in arrival order."""
    return (held,) if isinstance(held, int) else held


def count_of(held: Held) -> int:
    """How many labels a decision has."""
    return 1 if isinstance(held, int) else len(held)


class HeldLabels:
    """Every label the model holds, by slot, and the visible ones by decision id (see the module docstring). A slot
    let go is given to the next label; a decision id no label names any more is let go too."""

    __slots__ = ("_free_entries", "_index", "_kind_index", "_strings", "decisions", "entry", "free", "kind", "kinds",
                 "line", "named", "notes", "one", "several", "ts")

    def __init__(self) -> None:
        #: Per slot: the time (microseconds since the epoch), line number, index into :attr:`kinds`, and the entry of
        #: its decision id (-1: a slot let go).
        self.ts: array[int] = array("q")
        self.line: array[int] = array("q")
        self.kind: array[int] = array("i")
        self.entry: array[int] = array("i")
        #: Each (value, reviewer, path, generation) seen, once; and where it is.
        self.kinds: list[Kind] = []
        self._kind_index: dict[Kind, int] = {}
        self._strings: dict[str, str] = {}
        #: The notes of the labels that have one, by slot.
        self.notes: dict[int, str] = {}
        #: Slots let go, to be given again.
        self.free: array[int] = array("q")
        #: Per entry: its decision id, how many held labels name it, and its visible labels (``one``: the slot, or
        #: NONE, or SEVERAL: then ``several`` has them).
        self.decisions = Ids()
        self.named: array[int] = array("I")
        self.one: array[int] = array("i")
        self.several: dict[int, tuple[int, ...] | list[int]] = {}
        self._free_entries: array[int] = array("q")
        self._index = SparseIdIndex(self.decisions)

    def __len__(self) -> int:
        """How many labels are held."""
        return len(self.ts) - len(self.free)

    # --- labels

    def add(self, label: Label) -> int:
        """Hold ``label``; returns its slot."""
        key = (label.value, label.reviewer, label.path, label.generation)
        k = self._kind_index.get(key)
        if k is None:  # a combination not seen before (rare): its strings held once across combinations too
            share = self._strings.setdefault
            k = self._kind_index[key] = len(self.kinds)
            self.kinds.append((share(key[0], key[0]), share(key[1], key[1]), share(key[2], key[2]), key[3]))
        us, entry = to_us(label.ts), self._entry(label.decision)
        self.named[entry] += 1
        if self.free:
            slot = self.free.pop()
            self.ts[slot], self.line[slot], self.kind[slot], self.entry[slot] = us, label.line, k, entry
        else:
            slot = len(self.ts)
            self.ts.append(us)
            self.line.append(label.line)
            self.kind.append(k)
            self.entry.append(entry)
        if label.note is not None:
            self.notes[slot] = label.note
        return slot

    def _entry(self, decision: str) -> int:
        """The entry of ``decision`` (made when no held label names it yet)."""
        entry = self._index.get(decision)
        if entry == EMPTY:
            if self._free_entries:  # an entry let go is given again
                entry = self._free_entries.pop()
                self.named[entry], self.one[entry] = 0, NONE
            else:
                entry = len(self.named)
                self.named.append(0)
                self.one.append(NONE)
            self.decisions.put(entry, decision)
            self._index.put(decision, entry)
        return entry

    def drop(self, slot: int) -> None:
        """Let go of the label in ``slot`` (it is filed as visible nowhere: see :meth:`unfile`)."""
        entry = self.entry[slot]
        self.entry[slot] = -1
        self.notes.pop(slot, None)
        self.free.append(slot)
        self.named[entry] -= 1
        if not self.named[entry]:
            assert self.one[entry] == NONE, "a label still filed as visible was let go"
            self._index.remove(self.decisions.text(entry))
            self.decisions.release(entry)
            self._free_entries.append(entry)

    def decision(self, slot: int) -> str:
        """The decision id the label in ``slot`` names."""
        return self.decisions.text(self.entry[slot])

    def label(self, slot: int) -> Label:
        """The label in ``slot``, made again."""
        value, reviewer, path, generation = self.kinds[self.kind[slot]]
        return Label(from_us(self.ts[slot]), self.decision(slot), value, reviewer, path, self.line[slot], generation,
                     self.notes.get(slot))

    def labels(self, held: Held) -> list[Label]:
        """A decision's labels, in arrival order."""
        return [self.label(s) for s in slots_of(held)]

    def value(self, slot: int) -> str:
        """The value (``up``, ``down``) of the label in ``slot``."""
        return self.kinds[self.kind[slot]][0]

    def latest(self, held: Held) -> int:
        """The slot of a decision's latest label (the first of the latest, on equal times)."""
        if isinstance(held, int):
            return held
        ts = self.ts
        return max(held, key=ts.__getitem__)

    def current_values(self, held: Held) -> list[str]:
        """The values of each reviewer's current label on a decision, by reviewer (one label: itself)."""
        if isinstance(held, int):
            return [self.value(held)]
        return [lb.value for lb in current_labels(self.labels(held))]

    def current_down(self, held: Held) -> list[Label]:
        """Each reviewer's current label on a decision where it is ``down``, by reviewer."""
        if isinstance(held, int):  # the common case: no label made unless it is down
            return [self.label(held)] if self.value(held) == "down" else []
        return down_labels(current_labels(self.labels(held)))

    # --- the visible labels by decision id

    def visible(self, decision: str) -> Held | None:
        """The visible labels on ``decision``, in arrival order (None: none)."""
        entry = self._index.get(decision)
        return None if entry == EMPTY else self._held(entry)

    def _held(self, entry: int) -> Held | None:
        one = self.one[entry]
        return None if one == NONE else self.several[entry] if one == SEVERAL else one

    def __contains__(self, decision: str) -> bool:
        """True when ``decision`` has a visible label."""
        return self.visible(decision) is not None

    def file(self, slot: int) -> None:
        """The label in ``slot`` is visible now: add it to its decision's, in arrival order."""
        entry = self.entry[slot]
        held = self._held(entry)
        if held is None:
            self.one[entry] = slot
            return
        if isinstance(held, int):
            held = (held, slot)
        elif isinstance(held, list):
            held.append(slot)
        else:
            held = (*held, slot) if len(held) < FEW_LABELS else [*held, slot]
        self.several[entry] = held
        self.one[entry] = SEVERAL

    def unfile(self, decision: str) -> Held | None:
        """``decision``'s visible labels, no longer filed as visible (their slots stay held: see :meth:`drop`)."""
        entry = self._index.get(decision)
        held = None if entry == EMPTY else self._held(entry)
        if held is not None:
            self.one[entry] = NONE
            self.several.pop(entry, None)
        return held

    def visible_items(self) -> Iterator[tuple[str, Held]]:
        """(decision id, its visible labels) of every decision with one."""
        for entry, one in enumerate(self.one):
            if one != NONE:
                yield self.decisions.text(entry), self.several[entry] if one == SEVERAL else one

    def unfile_all(self) -> list[int]:
        """Every visible label's slot, by decision in arrival order, no longer filed as visible (a rebuild files them
        again)."""
        slots = [s for _, held in self.visible_items() for s in slots_of(held)]
        self.one = array("i", [NONE]) * len(self.one)
        self.several.clear()
        return slots
