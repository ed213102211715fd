"""Labels as the live model holds them: columns of machine integers, no object per label.

A label is a slot of :class:`HeldLabels`: its time and line number as integers, its decision id (the decision's own
string), and its value, reviewer, file and generation as one index into a small table of the combinations seen (a
few reviewers write into a few files). The rare note goes in a map of its own. The model files a decision's labels
by slot (``_labels``: the slot itself while there is one, as most decisions have); a :class:`~collectors.records.Label`
is made again only where one is asked for: the labels on one decision, a reviewer's current ``down`` label.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from collectors.records import Label
from collectors.rfc3339 import from_us, to_us
from scorers.lookups import current_labels, down_labels

#: A decision's labels as the model files them: one slot, or several in arrival order (a tuple while few).
Held = int | tuple[int, ...] | list[int]
#: What a label holds beside its time, line, decision and note: (value, reviewer, path, generation).
Kind = tuple[str, str, str, int]


def slots_of(held: Held) -> Iterable[int]:
    """The slots of a decision's labels, in arrival order."""
    return (held,) if isinstance(held, int) else held


def count_of(held: Held) -> int:
    """How many labels a decision has."""
    return 1 if isinstance(held, int) else len(held)


class HeldLabels:
    """Every label the model holds, by slot (see the module docstring). A slot let go is given to the next label."""

    __slots__ = ("_kind_index", "_strings", "decision", "free", "kind", "kinds", "line", "notes", "ts")

    def __init__(self) -> None:
        #: Per slot: the time (microseconds since the epoch), line number, index into :attr:`kinds`, decision id.
        self.ts: array[int] = array("q")
        self.line: array[int] = array("q")
        self.kind: array[int] = array("i")
        self.decision: list[str | None] = []
        #: Each (value, reviewer, path, generation) seen, once; and where it is.
        self.kinds: list[Kind] = []
        self._kind_index: dict[Kind, int] = {}
        self._strings: dict[str, str] = {}
        #: The notes of the labels that have one, by slot.
        self.notes: dict[int, str] = {}
        #: Slots let go, to be given again.
        self.free: array[int] = array("q")

    def __len__(self) -> int:
        """How many labels are held."""
        return len(self.decision) - len(self.free)

    def add(self, label: Label, decision: str) -> int:
        """Hold ``label`` (on ``decision``: the string to keep for its decision id); returns its slot."""
        key = (label.value, label.reviewer, label.path, label.generation)
        k = self._kind_index.get(key)
        if k is None:  # a combination not seen before (rare): its strings held once across combinations too
            share = self._strings.setdefault
            k = self._kind_index[key] = len(self.kinds)
            self.kinds.append((share(key[0], key[0]), share(key[1], key[1]), share(key[2], key[2]), key[3]))
        us = to_us(label.ts)
        if self.free:
            slot = self.free.pop()
            self.ts[slot], self.line[slot], self.kind[slot], self.decision[slot] = us, label.line, k, decision
        else:
            slot = len(self.decision)
            self.ts.append(us)
            self.line.append(label.line)
            self.kind.append(k)
            self.decision.append(decision)
        if label.note is not None:
            self.notes[slot] = label.note
        return slot

    def drop(self, slot: int) -> None:
        """Let go of the label in ``slot``."""
        self.decision[slot] = None
        self.notes.pop(slot, None)
        self.free.append(slot)

    def label(self, slot: int) -> Label:
        """The label in ``slot``, made again."""
        decision = self.decision[slot]
        assert decision is not None, "a slot let go was read"
        value, reviewer, path, generation = self.kinds[self.kind[slot]]
        return Label(from_us(self.ts[slot]), decision, value, reviewer, path, self.line[slot], generation,
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
