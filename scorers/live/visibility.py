"""Which stored records the model shows at ``T``: records arrive, win their ids or wait behind the winner, hide until
their time comes, and go (a Markdown file changed) or come back from the store (an id the model let go).

"Nothing after T exists" (spec, Time): records, labels and checks dated after T wait in heaps until T reaches them;
spec 1.1 makes the first record of an id in read order its winner, however old.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from collectors.citations import Citation
from collectors.jsonl import from_json_list
from collectors.records import CheckResult, Event, Label, Order
from collectors.rfc3339 import from_us, from_us_many, to_us
from scorers.live.base import DAWN, ModelState, document_events
from scorers.live.columns import NO_SHAPE, Columns
from scorers.live.labels import HeldLabels, count_of, slots_of
from scorers.live.records import Packed, Record, Shape, Source, Stub, Vocabulary, order_of, pack, reduce_text
from scorers.lookups import take_check

#: Labels on one decision id held as a tuple of slots up to this many, then as a list.
FEW_LABELS = 8
#: Raw shapes (and citation lists) :meth:`Visibility.add_rows` remembers at most: a text repeated in nearby rows is
#: reduced once, and what is remembered stays small.
RAW_HELD = 8_192
#: What the store holds under some ids: every event with one of them, every label on one of them.
Lookup = Callable[[Collection[str]], tuple[list[Event], list[Label]]]


class Visibility(ModelState):
    """Records in and out, and their visibility as T moves."""

    def records(self) -> list[Record]:
        """Every record the model holds (visible, shadowed, hidden, loaded, removed while hidden), each once."""
        return [*self._winner.values(), *(e for rest in self._shadowed.values() for e in rest),
                *(h[2] for h in self._hidden), *self._loaded]

    def holds_id(self, record_id: str) -> bool:
        """True if a record with this id is here (shown, or dated after T), or was let go (its 64-bit hash matches:
        the store has it). Records added before the first evaluation are not asked about (see LiveFeed.knows)."""
        return record_id in self._winner or record_id in self._hidden_ids or self._let_go(record_id)

    def size(self) -> tuple[int, int]:
        """(records held, ids let go): what :meth:`records` would list, counted without listing them."""
        held = len(self._winner) + sum(map(len, self._shadowed.values())) + len(self._hidden) + len(self._loaded)
        return held, self._evicted.count + self.let_go_elsewhere_count

    def _stored_events(self) -> list[Record]:
        """The records still stored: :meth:`records` without the ones removed while hidden."""
        return [e for e in self.records() if id(e) not in self._removed]

    # --- records in

    def add_events(self, events: Iterable[Event], lookup: Lookup | None = None) -> None:
        """Heartbeat events and Markdown decisions, in any order; an already stored (path, line) is ignored.

        ``lookup`` reads the store (committed, these records included): needed once the model has let records go,
        for a record whose id was among theirs (spec 1.1 makes the first in read order the winner, however old).
        """
        self._add(map(self._slim, events), lookup)

    def add_rows(self, rows: Iterable[tuple[Sequence[Any], Sequence[tuple[str, str]]]],
                 lookup: Lookup | None = None) -> None:
        """As :meth:`add_events`, for the events as the store's rows hold them (a load reads a million: this makes
        the model's records straight from the rows, with no :class:`Event` per row in between).

        Each row is (rowid, id, time in microseconds since the epoch, agent, kind, path, line (0 for a Markdown
        decision), thread, text, prompt, reason, alternatives, subject, corrects, generation), alternatives and
        subject as JSON arrays of strings, followed by its citations' (type, target) pairs; items past the row's
        fifteenth are not read.
        """
        self._add(self._records_of(rows), lookup)

    def add_columns(self, chunks: Iterable[Columns], lookup: Lookup | None = None) -> None:
        """As :meth:`add_rows`, for rows made into :class:`~scorers.live.columns.Columns` (their texts reduced already
        with this model's vocabulary: :meth:`read_plan` says how)."""
        self._add(itertools.chain.from_iterable(map(self._records_of_columns, chunks)), lookup)

    def read_plan(self) -> tuple[Vocabulary | None, frozenset[str]]:
        """What :func:`~scorers.live.columns.columns_of` needs to make rows into columns for this model: its vocabulary
        and its decision kinds."""
        return self._vocabulary, self._decision_kinds

    def _add(self, records: Iterable[Record], lookup: Lookup | None) -> None:
        watch = self._may_have_let_go() and not self._readmitting
        arrived: list[Record] = []
        recalled: set[str] = set()
        if self._fresh and not watch:  # a load: every record waits for the first evaluation's sort
            loaded, file_document = self._loaded, self._file_document
            for e in records:
                if e.line is None and isinstance(e, Event):
                    file_document(e)
                loaded.append(e)
            return
        for e in records:
            if watch:
                arrived.append(e)
                if self._let_go(e.id):
                    recalled.add(e.id)
            if isinstance(e, Event) and e.line is None:
                self._file_document(e)
            self._arrive(e)
        if recalled:
            self._recall(recalled, {e.order for e in arrived if e.id in recalled}, lookup)

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
        for old in document_events(self._documents.pop(path, None)):
            self._depart(old)
        self.add_events(events, lookup)

    def add_labels(self, labels: Iterable[Label]) -> None:
        """Reviewer labels, in any order. A label on a decision the model let go is left to the store (it comes
        back with its decision, should that be recalled)."""
        held, winner, let_go = self._label_columns, self._winner, self._let_go
        for label in labels:
            decision = label.decision
            if let_go(decision):
                continue
            known = winner.get(decision)
            # Its decision id held as the decision's own string when the model holds the decision (a rebuild files
            # every label again once the decisions are in).
            slot = held.add(label, decision if known is None else known.id)
            if self._fresh:
                self._loaded_labels.append(slot)  # the first evaluation files them all (a heap entry each would cost)
            elif label.ts > self.at:
                heapq.heappush(self._hidden_labels, (label.ts, next(self._seq), slot))
            else:
                self._show_label(slot)

    def _labels_to_file_again(self) -> list[int]:
        """Every label's slot, as a rebuild files them again: the visible ones by decision in arrival order, then
        the hidden ones, then those added before the first evaluation."""
        return [*(s for held in self._labels.values() for s in slots_of(held)), *(h[2] for h in self._hidden_labels),
                *self._loaded_labels]

    def _file_labels_again(self, held: HeldLabels, slots: Iterable[int]) -> None:
        """After a rebuild's records are in: the labels in ``held``'s ``slots`` (:meth:`_labels_to_file_again`),
        filed as :meth:`add_labels` would file them (their decision ids now the decisions' own strings)."""
        self._label_columns = held
        decisions, ts, winner, let_go, at = held.decision, held.ts, self._winner, self._let_go, to_us(self.at)
        for slot in slots:
            decision = decisions[slot]
            assert decision is not None
            if let_go(decision):
                held.drop(slot)
                continue
            known = winner.get(decision)
            if known is not None:
                decisions[slot] = known.id
            if ts[slot] > at:
                heapq.heappush(self._hidden_labels, (from_us(ts[slot]), next(self._seq), slot))
            else:
                self._show_label(slot)

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

    def _slim(self, e: Event) -> Record:
        """``e`` packed (see :class:`~scorers.live.records.Packed`) with its text reduced to the phrases it matches and
        its repeated values shared; a stub when it is not a decision (see :class:`Stub`: a state change is read only
        through its time)."""
        share = self._shared.setdefault
        if e.line is not None and e.kind not in self._decision_kinds:
            return Stub(e.id, e.ts, share(e.kind, e.kind), share(e.path, e.path), share(e.line, e.line),
                        e.generation)
        shape = self._shape(e.text, e.prompt, e.reason, e.alternatives, e.subject, e.corrects, e.generation)
        # Line numbers too: one int object per line number, not per event (most are above the small-int cache).
        source = self._source(share(e.agent, e.agent), share(e.kind, e.kind), share(e.path, e.path))
        return pack(e.id, e.ts, source, share(e.line, e.line), share(e.thread, e.thread),
                    self._share_citations(e.citations), shape)

    def _source(self, agent: str, kind: str, path: str) -> Source:
        """The shared :class:`~scorers.live.records.Source` of these values."""
        source = tuple.__new__(Source, (agent, kind, path))  # Source(...) without NamedTuple's Python-level __new__
        found: Source = self._shared.setdefault(("source", source), source)
        return found

    def _shape(self, text: str, prompt: str | None, reason: str | None, alternatives: tuple[str, ...],
               subject: tuple[str, ...], corrects: str | None, generation: int) -> Shape:
        """The shared :class:`~scorers.live.records.Shape` of a decision, its text reduced."""
        text = text if self._vocabulary is None else reduce_text(text, self._vocabulary)
        return self._shared_shape(text, prompt, reason, alternatives, subject, corrects, generation)

    def _shared_shape(self, text: str, prompt: str | None, reason: str | None, alternatives: tuple[str, ...],
                      subject: tuple[str, ...], corrects: str | None, generation: int) -> Shape:
        """The shared :class:`~scorers.live.records.Shape` of these values (the text reduced already)."""
        share = self._shared.setdefault
        shape = tuple.__new__(Shape, (share(text, text), share(prompt, prompt), share(reason, reason),
                                      share(alternatives, alternatives), share(subject, subject), corrects,
                                      generation))  # Shape(...) without NamedTuple's Python-level __new__
        found: Shape = share(("shape", shape), shape)
        return found

    def _records_of(self, rows: Iterable[tuple[Sequence[Any], Sequence[tuple[str, str]]]]) -> Iterator[Record]:
        """The records :meth:`_slim` makes of the events these rows hold (see :meth:`add_rows`).

        Decisions that share their shape's raw values (text, prompt, reason, alternatives, subject, corrects and
        generation, the row's items 8 to 14) share its slimmed tuple: those of the latest rows are remembered, so a
        text repeated nearby is reduced once. Their citations likewise."""
        share = self._shared.setdefault
        decision_kinds = self._decision_kinds
        new = tuple.__new__
        shapes: dict[Sequence[Any], Shape] = {}
        cited: dict[tuple[tuple[str, str], ...], tuple[Citation, ...]] = {}
        sources: dict[tuple[Any, ...], Source] = {}
        for r, pairs in rows:
            line, kind, path = r[6], share(r[4], r[4]), share(r[5], r[5])
            if line and kind not in decision_kinds:
                yield Stub(r[1], from_us(r[2]), kind, path, share(line, line), r[14])
                continue
            raw = r[8:15]
            shape = shapes.get(raw)
            if shape is None:
                if len(shapes) >= RAW_HELD:
                    shapes.clear()
                shape = shapes[raw] = self._shape(r[8], r[9], r[10], from_json_list(r[11]), from_json_list(r[12]),
                                                  r[13], r[14])
            citations: tuple[Citation, ...] = ()
            if pairs:
                key = tuple(pairs)
                found = cited.get(key)
                if found is None:
                    if len(cited) >= RAW_HELD:
                        cited.clear()
                    found = cited[key] = self._share_citations(tuple(Citation(*p) for p in pairs))
                citations = found
            line = line or None
            key = (r[3], kind, path)
            source = sources.get(key)
            if source is None:
                source = sources[key] = self._source(share(r[3], r[3]), kind, path)
            yield new(Packed, (r[1], from_us(r[2]), source, share(line, line), share(r[7], r[7]), citations,
                               shape))  # pack's tuple, made here: this runs for every row

    def _records_of_columns(self, c: Columns) -> Iterator[Record]:
        """The records :meth:`_records_of` makes of the rows these columns hold."""
        share = self._shared.setdefault
        values = [share(v, v) for v in c.values]
        shapes = [self._shared_shape(*s) for s in c.shapes]
        cited = [self._share_citations(tuple(Citation(*p) for p in pairs)) for pairs in c.citations]
        new = tuple.__new__
        sources: dict[tuple[int, int, int], Source] = {}
        for rid, ts, agent, kind, path, thread, line, generation, shape, citations in zip(
                c.ids, from_us_many(c.us), c.agent_at, c.kind_at, c.path_at, c.thread_at, c.line, c.generation,
                c.shape_at, c.citations_at, strict=True):
            if shape == NO_SHAPE:
                yield Stub(rid, ts, values[kind], values[path], share(line, line), generation)
                continue
            held = line or None
            key = (agent, kind, path)
            source = sources.get(key)
            if source is None:
                source = sources[key] = self._source(values[agent], values[kind], values[path])
            yield new(Packed, (rid, ts, source, share(held, held), values[thread], cited[citations], shapes[shape]))

    def _share_citations(self, citations: tuple[Citation, ...]) -> tuple[Citation, ...]:
        """``citations`` held once, and each citation in them held once: most decisions cite sources other decisions
        cite too, in another combination."""
        if not citations:
            return citations
        share = self._shared.setdefault
        # Keyed apart: a citation equals the plain tuple of its two strings (a decision's subject could be one).
        shared = tuple(share(("citation", c), c) for c in citations)
        found: tuple[Citation, ...] = share(shared, shared)
        return found

    def _arrive(self, e: Record) -> None:
        if self._fresh:
            self._loaded.append(e)  # the first evaluation sorts them all at once (a heap entry each would cost more)
        elif e.ts > self.at:
            heapq.heappush(self._hidden, (e.ts, next(self._seq), e))
            self._hidden_ids[e.id] += 1
        else:
            self._show(e)

    def _file_document(self, e: Event) -> None:
        """File a Markdown decision under its document (see ``_documents``)."""
        held = self._documents.get(e.path)
        if held is None:
            self._documents[e.path] = e
        elif isinstance(held, list):
            held.append(e)
        else:
            self._documents[e.path] = [held, e]

    def _is_decision(self, e: Record) -> bool:
        return e.line is None or e.kind in self._decision_kinds

    # --- winners and the records behind them

    def _show(self, e: Record, index: Callable[[Record], None] | None = None) -> None:
        """A stored event became visible: it wins its id, or waits behind the winner in read order. ``index``: how a
        new id's winner is indexed (:meth:`_index` when None)."""
        winner = self._winner.get(e.id)
        if winner is None:
            self._winner[e.id] = e
            self._relabelled(e.id)
            if self._orphans and e.id in self._orphans:  # the labels on this id find their record
                self._orphans.discard(e.id)
                self.unmatched_labels -= count_of(self._labels[e.id])
            if self.evicts:
                self._days.setdefault(e.ts.toordinal(), []).append(e.id)
            (self._index if index is None else index)(e)
            return
        order = e.order
        if winner.order == order or any(s.order == order for s in self._shadowed.get(e.id, ())):
            return  # already stored: a replay
        if self.evicts:
            self._days.setdefault(e.ts.toordinal(), []).append(e.id)
        if order < winner.order:
            self._unindex(winner)
            self._shadowed.setdefault(e.id, []).append(winner)
            self._winner[e.id] = e
            self._relabelled(e.id)
            self._index(e)
        else:
            self._shadowed.setdefault(e.id, []).append(e)

    def _show_sorted(self, records: Iterable[Record]) -> None:
        """:meth:`_show` of each record in a rebuild, for records in (time, read order) (by
        :func:`~scorers.lookups.sort_key`): a new id's winner sorts after every one shown, so it goes at the end of
        every index (``_index_last``); a record of an id already shown is searched into place as usual."""
        file_document, show, index_last = self._file_document, self._show, self._index_last
        for e in records:
            if e.line is None and isinstance(e, Event):
                file_document(e)
            show(e, index_last)

    def _depart(self, e: Event) -> None:
        """A stored event was removed from the store (its Markdown file changed or went)."""
        if self._winner.get(e.id) is e:
            self._unindex(e)
            self._relabelled(e.id)
            rest = self._shadowed.pop(e.id, [])
            if rest:
                rest.sort(key=order_of)
                nxt, others = rest[0], rest[1:]
                if others:
                    self._shadowed[e.id] = others
                self._winner[e.id] = nxt
                self._index(nxt)
                self._file_again(e.id)
            else:
                del self._winner[e.id]
                labels = self._labels.get(e.id)
                if labels is not None:  # its labels now name no record (slot 0 alone is a label too)
                    self._orphans.add(e.id)
                    self.unmatched_labels += count_of(labels)
            return
        shadowed = self._shadowed.get(e.id, [])
        for i, s in enumerate(shadowed):
            if s is e:
                del shadowed[i]
                if not shadowed:
                    del self._shadowed[e.id]
                self._file_again(e.id)
                return
        self._removed[id(e)] = e  # still hidden: forget it when its time comes
        if not self._fresh:  # in _hidden, not _loaded
            self._unhide_id(e.id)

    def _unhide_id(self, record_id: str) -> None:
        """One hidden record of this id shown or removed."""
        left = self._hidden_ids[record_id] - 1
        if left:
            self._hidden_ids[record_id] = left
        else:
            del self._hidden_ids[record_id]

    def _file_again(self, record_id: str) -> None:
        """One of the id's records went and others stay: file the id under the day of its newest one left. The days
        of the others may have been let go already while the one that went held the id back; without this the id
        would wait for the day of the record that went."""
        if self.evicts:
            newest = max(r.ts for r in (self._winner[record_id], *self._shadowed.get(record_id, ())))
            self._days.setdefault(newest.toordinal(), []).append(record_id)

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
        if record_id in self._labels:
            self._tally = None

    def _file_label(self, decision: str, slot: int) -> None:
        """Add a visible label to its decision id's labels (see ``_labels``)."""
        self._tally = None
        held = self._labels.get(decision)
        if held is None:
            self._labels[decision] = slot
        elif isinstance(held, int):
            self._labels[decision] = (held, slot)
        elif isinstance(held, list):
            held.append(slot)
        elif len(held) < FEW_LABELS:
            self._labels[decision] = (*held, slot)
        else:
            self._labels[decision] = [*held, slot]

    def _show_label(self, slot: int) -> None:
        held = self._label_columns
        decision = held.decision[slot]
        assert decision is not None
        if self._let_go(decision):
            held.drop(slot)
            return  # waited hidden while its decision was let go
        self._file_label(decision, slot)
        d = self._winner.get(decision)
        if d is None:
            self._orphans.add(decision)
            self.unmatched_labels += 1
        if isinstance(d, Event) and self._is_decision(d):
            if self.plan.replies:
                labelled = self._agents[d.agent].labelled
                latest = labelled.get(d.id)
                if latest is None or held.ts[slot] > held.ts[latest]:
                    labelled[d.id] = slot
            if self.plan.labels:
                self._touch(d)

    # --- time

    def _advance(self, at: datetime) -> None:
        """Move T forward: show what is now in the past, and re-evaluate outcomes whose validity ran out."""
        self.at = at
        while self._hidden and self._hidden[0][0] <= at:
            e = heapq.heappop(self._hidden)[2]
            if self._removed.pop(id(e), None) is None:
                self._unhide_id(e.id)
                self._show(e)
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
        while self._expiry and self._expiry[0][0] <= at:
            self._touch(heapq.heappop(self._expiry)[2])
