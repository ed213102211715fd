"""Which stored records the model shows at ``T``: records arrive, win their ids or wait behind the winner, hide until
their time comes, and go (a Markdown file changed) or come back from the store (an id the model let go).

"Nothing after T exists" (spec, Time): records, labels and checks dated after T wait in heaps until T reaches them;
spec 1.1 makes the first record of an id in read order its winner, however old. Records are slots of the table
(scorers/live/table.py) from the moment they arrive; a replay of a record already held is let go at once.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from collectors.records import CheckResult, Event, Label, Order
from collectors.rfc3339 import from_us, to_us
from scorers.live.base import DAWN, SLOTS, ModelState, slots_in
from scorers.live.columns import Columns
from scorers.live.ids import EMPTY
from scorers.live.labels import HeldLabels, count_of
from scorers.live.records import Vocabulary
from scorers.lookups import take_check

#: What the store holds under some ids: every event with one of them, every label on one of them.
Lookup = Callable[[Collection[str]], tuple[list[Event], list[Label]]]


class LatestLabels:
    """A rebuild's latest visible label on each labelled decision, in the order the decisions were first labelled (as
    :meth:`~scorers.live.agents.Agent.set_labelled` would append them): filed in the agents' columns at the end,
    without a search of an agent's labelled decisions per label. Columns by the labels' entries (one per decision id),
    not a dict: the bench store's 128k labelled decisions cost ~7 MB more at the first evaluation's peak as one."""

    def __init__(self, held: HeldLabels) -> None:
        self.held = held
        self.latest: array[int] = array("i", [-1]) * len(held.named)
        self.decisions: array[int] = array(SLOTS)
        self.entries: array[int] = array("i")

    def file(self, d: int, slot: int) -> None:
        """The label in ``slot`` is on the decision ``d`` (its winner) and visible."""
        held = self.held
        entry = held.entry[slot]
        was = self.latest[entry]
        if was == -1:
            self.decisions.append(d)
            self.entries.append(entry)
        elif held.ts[slot] <= held.ts[was]:
            return
        self.latest[entry] = slot

    def filed(self) -> Iterator[tuple[int, int]]:
        """(decision, its latest label's slot), first labelled first."""
        latest = self.latest
        return zip(self.decisions, (latest[e] for e in self.entries), strict=True)


class Visibility(ModelState):
    """Records in and out, and their visibility as T moves."""

    def _held_slots(self) -> array[int]:
        """Every slot held (visible, shadowed, hidden, loaded, removed while hidden), each once (a column: a list of a
        million slots would cost 40 MB while it lives)."""
        held = array(SLOTS, self._loaded)
        held.extend(self._winner.values())
        held.extend(s for rest in self._shadowed.values() for s in rest)
        held.extend(h[2] for h in self._hidden)
        return held

    def records(self) -> list[Event]:
        """Every record the model holds (visible, shadowed, hidden, loaded, removed while hidden), each once, as the
        Event it stands for (a record of no decision kind without what no rule reads: its text, thread and the rest)."""
        return [self._table.event(s) for s in self._held_slots()]

    def holds_id(self, record_id: str) -> bool:
        """True if a record with this id is here (shown, or dated after T), or was let go (its 64-bit hash matches:
        the store has it). Records added before the first evaluation are not asked about (see LiveFeed.knows)."""
        return record_id in self._winner or record_id in self._hidden_ids or self._let_go(record_id)

    def size(self) -> tuple[int, int]:
        """(records held, ids let go): what :meth:`records` would list, counted without listing them."""
        held = len(self._winner) + sum(map(len, self._shadowed.values())) + len(self._hidden) + len(self._loaded)
        return held, self._evicted.count + self.let_go_elsewhere_count

    # --- records in

    def add_events(self, events: Iterable[Event], lookup: Lookup | None = None) -> None:
        """Heartbeat events and Markdown decisions, in any order; an already stored (path, line) is ignored.

        ``lookup`` reads the store (committed, these records included): needed once the model has let records go,
        for a record whose id was among theirs (spec 1.1 makes the first in read order the winner, however old).
        """
        self._add(map(self._table.add_event, events), lookup)

    def add_rows(self, rows: Iterable[tuple[Sequence[Any], Sequence[tuple[str, str]]]],
                 lookup: Lookup | None = None) -> None:
        """As :meth:`add_events`, for the events as the store's rows hold them (a load reads a million: this puts them
        in the table straight from the rows, with no :class:`Event` per row in between).

        Each row is (rowid, id, time in microseconds since the epoch, agent, kind, path, line (0 for a Markdown
        decision), thread, text, prompt, reason, alternatives, subject, corrects, generation), alternatives and
        subject as JSON arrays of strings, followed by its citations' (type, target) pairs; items past the row's
        fifteenth are not read.
        """
        self._add(self._table.add_rows(rows), lookup)

    def add_columns(self, chunks: Iterable[Columns], lookup: Lookup | None = None) -> None:
        """As :meth:`add_rows`, for rows made into :class:`~scorers.live.columns.Columns` (their texts reduced already
        with this model's vocabulary: :meth:`read_plan` says how)."""
        for c in chunks:
            self._add(self._table.add_columns(c), lookup)

    def loaded(self) -> None:
        """A load's records are all in: the table lets go of the index it shared their equal strings by (a dict of
        each distinct value; the values stay). Records added from here on share theirs among themselves, as after a
        start from the model cache, which does not keep that index."""
        self._table.strings = {}

    def read_plan(self) -> tuple[Vocabulary | None, frozenset[str]]:
        """What :func:`~scorers.live.columns.columns_of` needs to make rows into columns for this model: its vocabulary
        and its decision kinds."""
        return self._vocabulary, self._decision_kinds

    def _add(self, slots: Iterator[int], lookup: Lookup | None) -> None:
        watch = self._may_have_let_go() and not self._readmitting
        t = self._table
        if self._fresh and not watch:  # a load: every record waits for the first evaluation
            loaded, file_document, markdown = self._loaded, self._file_document, t.is_markdown
            for s in slots:  # (the table's narrow columns may widen, so are replaced, while slots are made)
                if markdown(s):
                    file_document(s)
                loaded.append(s)
            return
        recalled: set[str] = set()
        arrived: list[tuple[str, Order]] = []
        for s in slots:
            if watch:  # the id and read order taken now: a replay's slot is let go as it arrives
                rid = t.id(s)
                arrived.append((rid, t.order(s)))
                if self._let_go(rid):
                    recalled.add(rid)
            if t.is_markdown(s):
                self._file_document(s)
            self._arrive(s)
        if recalled:
            self._recall(recalled, {order for rid, order in arrived if rid in recalled}, lookup)

    def _recall(self, ids: set[str], arrived: set[Order], lookup: Lookup | None) -> None:
        """Take back every record the model let go under ``ids``, and their labels: the store holds them (and the
        records of those ids that just ``arrived``, which it returns as well and are not taken twice)."""
        if lookup is None:
            raise ValueError("records whose ids the model let go arrived without a lookup into the store")
        events, labels = lookup(ids)
        self._readmitting = True
        try:
            self.add_events(e for e in events if e.ts <= self.evicted_to and e.order not in arrived)
        finally:
            self._readmitting = False
        self.add_labels(labels)

    def replace_document(self, path: str, events: Iterable[Event], lookup: Lookup | None = None) -> None:
        """A brief or finding changed or vanished: its decisions are now ``events`` (none when deleted)."""
        for old in slots_in(self._documents.pop(path, None)):
            self._depart(old)
        self.add_events(events, lookup)

    def add_labels(self, labels: Iterable[Label]) -> None:
        """Reviewer labels, in any order. A label on a decision the model let go is left to the store (it comes
        back with its decision, should that be recalled)."""
        held, let_go = self._label_columns, self._let_go
        for label in labels:
            if let_go(label.decision):
                continue
            slot = held.add(label)
            if self._fresh:
                self._loaded_labels.append(slot)  # the first evaluation files them all (a heap entry each would cost)
            elif label.ts > self.at:
                heapq.heappush(self._hidden_labels, (label.ts, next(self._seq), slot))
            else:
                self._show_label(slot)

    def _labels_to_file_again(self) -> list[int]:
        """Every label's slot, as a rebuild files them again: the visible ones by decision in arrival order, then
        the hidden ones, then those added before the first evaluation."""
        return [*self._label_columns.unfile_all(), *(h[2] for h in self._hidden_labels), *self._loaded_labels]

    def _file_labels_again(self, held: HeldLabels, slots: Iterable[int]) -> None:
        """After a rebuild's records are in: the labels in ``held``'s ``slots`` (:meth:`_labels_to_file_again`),
        filed as :meth:`add_labels` would file them."""
        self._label_columns = held
        ts, let_go, at = held.ts, self._let_go, to_us(self.at)
        latest = LatestLabels(held)
        for slot in slots:
            decision = held.decision(slot)
            if let_go(decision):
                held.drop(slot)
            elif ts[slot] > at:
                heapq.heappush(self._hidden_labels, (from_us(ts[slot]), next(self._seq), slot))
            else:
                self._file_label(slot, decision, latest)
        t = self._table
        for d, slot in latest.filed():
            a = self._agents[t.agent(d)]
            a.labelled.append(d)
            a.label_slots.append(slot)

    def add_checks(self, checks: Iterable[CheckResult]) -> None:
        """Verification results (inconclusive ones are kept but never used, as in the pure evaluation)."""
        shown: set[tuple[str, str]] = set()
        for c in checks:
            self._all_checks.append(c)
            if self._fresh or c.checked_at > self.at:
                heapq.heappush(self._hidden_checks, (c.checked_at, next(self._seq), c))
            elif take_check(self.latest_checks, c):
                shown.add((c.type, c.target))
        self._touch_citing(shown)

    def _arrive(self, s: int) -> None:
        t = self._table
        if self._fresh:
            self._loaded.append(s)  # the first evaluation sorts them all at once (a heap entry each would cost more)
        elif t.ts[s] > to_us(self.at):
            heapq.heappush(self._hidden, (t.ts[s], next(self._seq), s))
            self._hidden_ids[t.id(s)] += 1
        else:
            self._show(s)

    def _file_document(self, s: int) -> None:
        """File a Markdown decision under its document (see ``_documents``)."""
        path = self._table.path(s)
        held = self._documents.get(path)
        if held is None:
            self._documents[path] = s
        elif isinstance(held, list):
            held.append(s)
        else:
            self._documents[path] = [held, s]

    def _unfile_document(self, s: int) -> None:
        """Take a Markdown decision out of its document's (a replay let go, a record let go behind the windows)."""
        path = self._table.path(s)
        kept = [x for x in slots_in(self._documents.get(path)) if x != s]
        if len(kept) > 1:
            self._documents[path] = kept
        elif kept:
            self._documents[path] = kept[0]
        else:
            self._documents.pop(path, None)

    # --- winners and the records behind them

    def _show(self, s: int) -> None:
        """A stored record became visible: it wins its id, or waits behind the winner in read order."""
        t = self._table
        rid = t.id(s)
        winner = self._winner.get(rid)
        if winner == EMPTY:
            self._winner.put(rid, s)
            self._relabelled(rid)
            if self._orphans and rid in self._orphans:  # the labels on this id find their record
                self._orphans.discard(rid)
                held = self._label_columns.visible(rid)
                self.unmatched_labels -= 0 if held is None else count_of(held)  # slot 0 is a label too
            self._index(s)
            return
        order = t.order(s)
        if t.order(winner) == order or any(t.order(x) == order for x in self._shadowed.get(rid, ())):
            self._let_go_of_replay(s)
            return
        if order < t.order(winner):
            self._unindex(winner)
            self._shadowed.setdefault(rid, []).append(winner)
            self._winner.put(rid, s)
            self._relabelled(rid)
            self._index(s)
        else:
            self._shadowed.setdefault(rid, []).append(s)

    def _let_go_of_replay(self, s: int) -> None:
        """A record already stored arrived again (a replay): its slot goes."""
        if self._table.is_markdown(s):
            self._unfile_document(s)
        self._table.release(s)

    def _depart(self, s: int) -> None:
        """A stored event was removed from the store (its Markdown file changed or went)."""
        t = self._table
        rid = t.id(s)
        if self._winner.get(rid) == s:
            self._unindex(s)
            self._relabelled(rid)
            rest = self._shadowed.pop(rid, [])
            if rest:
                rest.sort(key=t.order)
                nxt, others = rest[0], rest[1:]
                if others:
                    self._shadowed[rid] = others
                self._winner.put(rid, nxt)
                self._index(nxt)
            else:
                self._winner.remove(rid)
                labels = self._label_columns.visible(rid)
                if labels is not None:  # its labels now name no record (slot 0 alone is a label too)
                    self._orphans.add(rid)
                    self.unmatched_labels += count_of(labels)
            t.release(s)
            return
        shadowed = self._shadowed.get(rid, [])
        if s in shadowed:
            shadowed.remove(s)
            if not shadowed:
                del self._shadowed[rid]
            t.release(s)
            return
        self._removed.add(s)  # still hidden (or loaded): let go when its time comes
        if not self._fresh:  # in _hidden, not _loaded
            self._unhide_id(rid)

    def _unhide_id(self, record_id: str) -> None:
        """One hidden record of this id shown or removed."""
        left = self._hidden_ids[record_id] - 1
        if left:
            self._hidden_ids[record_id] = left
        else:
            del self._hidden_ids[record_id]

    def _may_have_let_go(self) -> bool:
        """False when no id can have been let go (nothing was, or nothing is to be asked)."""
        return bool(self._evicted.count) or (self.let_go_elsewhere is not None and self.evicted_to > DAWN)

    def _let_go(self, record_id: str) -> bool:
        """True when the records of this id are ones the model let go (or a hash says they might be: the store keeps
        every record and label, and a recall brings them back)."""
        if not self._may_have_let_go() or record_id in self._winner:
            return False
        if self._evicted.count and self._evicted.might_hold(record_id):
            return True
        ask = self.let_go_elsewhere
        return ask is not None and self.evicted_to > DAWN and ask(record_id, self.evicted_to)

    def _relabelled(self, record_id: str) -> None:
        """The record winning ``record_id`` changed: the label tally is to be made again if labels are on it."""
        if record_id in self._label_columns:
            self._tally = None

    def _show_label(self, slot: int, latest: LatestLabels | None = None) -> None:
        """File a visible label (``latest``: a rebuild's latest label by decision, in place of the agents' columns)."""
        held = self._label_columns
        decision = held.decision(slot)
        if self._let_go(decision):
            held.drop(slot)
            return  # waited hidden while its decision was let go
        self._file_label(slot, decision, latest)

    def _file_label(self, slot: int, decision: str, latest: LatestLabels | None) -> None:
        """:meth:`_show_label` for a label whose decision (``decision``) is not let go."""
        held = self._label_columns
        self._tally = None
        held.file(slot)
        d = self._winner.get(decision)
        if d == EMPTY:
            self._orphans.add(decision)
            self.unmatched_labels += 1
        elif self._table.is_decision(d):
            if self.plan.replies and latest is not None:
                latest.file(d, slot)
            elif self.plan.replies:
                a = self._agents[self._table.agent(d)]
                was = a.labelled_slot(d)
                if was is None or held.ts[slot] > held.ts[was]:
                    a.set_labelled(d, slot)
            if self.plan.labels:
                self._touch(d)

    # --- time

    def _advance(self, at: datetime) -> None:
        """Move T forward: show what is now in the past, and re-evaluate outcomes whose validity ran out."""
        self.at = at
        at_us, t = to_us(at), self._table
        while self._hidden and self._hidden[0][0] <= at_us:
            s = heapq.heappop(self._hidden)[2]
            if s in self._removed:
                self._removed.discard(s)
                t.release(s)
            else:
                self._unhide_id(t.id(s))
                self._show(s)
        while self._hidden_labels and self._hidden_labels[0][0] <= at:
            self._show_label(heapq.heappop(self._hidden_labels)[2])
        shown: set[tuple[str, str]] = set()
        while self._hidden_checks and self._hidden_checks[0][0] <= at:
            c = heapq.heappop(self._hidden_checks)[2]
            if take_check(self.latest_checks, c):
                shown.add((c.type, c.target))
        self._touch_citing(shown)
        while self._file_times and self._file_times[0][0] <= at:
            path = heapq.heappop(self._file_times)[1]
            entry = self._files.files.get(path)
            self._touch_path(path, set() if entry is None else {entry.created})
        while self._expiry and self._expiry[0][0] <= at_us:
            self._touch(heapq.heappop(self._expiry)[2])
