"""The records the live model holds, as columns: a slot per record, and no Python object per record.

A million decisions held as objects cost ~420 bytes each (a tuple, its id string, its time, the list and dict entries
of every index naming it). Here a record is a slot: its time as microseconds, its line, and indexes into small tables
of the values records share (who wrote it of what kind where, its thread, its citations, its shape: the text reduced
to the phrases it matches, with the prompt, reason, alternatives, subject, corrects and generation) in machine-integer
columns, and its id as UTF-8 bytes in one buffer. Every index of the model holds slots. An :class:`Event` is made
again only for what asks for one (a rule run for a decision, a page), and the last ones made are kept a while.

Ids are held by :class:`~scorers.live.ids.Ids` and found by an :class:`~scorers.live.ids.IdIndex` (the winners of
their ids: spec 1.1).
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from collectors.citations import Citation
from collectors.jsonl import from_json_list
from collectors.records import Event, Order
from collectors.rfc3339 import from_us, from_us_many, to_us
from scorers.live.columns import NO_SHAPE, Columns
from scorers.live.ids import Ids, Texts
from scorers.live.interned import Interned
from scorers.live.records import Vocabulary, reduce_text

#: The columns of positions and lines: two bytes a slot while every value fits, four from the first that does not.
NARROW = ("source", "line", "thread", "cited", "shape")
_FITS = 0xFFFF
#: A slot's key: (time in microseconds, path, generation, line): the order of :func:`scorers.lookups.sort_key`.
Key = tuple[int, str, int, int]
#: The Events made again that are kept (see :meth:`Table.event`): a rule reads its decision's neighbours too.
MADE_HELD = 4096
#: Raw shapes and citation lists remembered while rows are read (a text repeated nearby is reduced once).
RAW_HELD = 8192
#: Sources remembered while rows are read: every log's (a heartbeat's rows interleave those of all agents), not a
#: Markdown file's each (a key kept per file until the read ends was space freed among what the load keeps).
SOURCES_HELD = 4096
#: A table of shared values is written again without those no record names once it holds more than twice as many
#: as are named, and at least this many (see :meth:`Table.vacuum`).
VACUUM_FROM = 1024
#: Event's constructor without NamedTuple's generated ``__new__`` in between (a call less per Event made).
_new_event = tuple.__new__
#: The columns of positions into the tables of shared values, each with its table.
_SHARED = (("source", "sources"), ("thread", "threads"), ("cited", "citations"), ("shape", "shapes"))


class Source(NamedTuple):
    """Who wrote a record, of what kind, where: shared by every record of one agent's log and kind."""

    agent: str
    kind: str
    path: str


class Shape(NamedTuple):
    """The fields of a decision no index reads and many decisions share as a whole (a record no rule reads has the
    empty one of its generation)."""

    text: str
    prompt: str | None
    reason: str | None
    alternatives: tuple[str, ...]
    subject: tuple[str, ...]
    corrects: str | None
    generation: int


class Table:
    """Every record the model holds, by slot (see the module docstring). Not thread-safe: one owner."""

    __slots__ = ("_made", "citations", "cited", "decides", "decision_kinds", "free", "ids", "line", "shape", "shapes",
                 "source", "sources", "strings", "thread", "threads", "ts", "vocabulary")

    def __init__(self, vocabulary: Vocabulary | None, decision_kinds: frozenset[str]) -> None:
        self.vocabulary = vocabulary
        self.decision_kinds = decision_kinds
        #: Per slot: the time (microseconds since the epoch), its source's position, the line (0: none, a Markdown
        #: decision), and the positions of its thread, citations and shape in the tables below (see NARROW).
        self.ts: array[int] = array("q")
        self.source: array[int] = array("H")
        self.line: array[int] = array("H")
        self.thread: array[int] = array("H")
        self.cited: array[int] = array("H")
        self.shape: array[int] = array("H")
        #: Per slot, its record's id (a slot whose id is let go holds no record).
        self.ids = Ids()
        self.free: array[int] = array("i")
        self.sources = Interned()
        #: Per source: 1 when its kind is a decision kind.
        self.decides = bytearray()
        #: Threads by position (0: none), without a Python string each.
        self.threads = Texts()
        self.citations = Interned([()])
        self.shapes = Interned()
        #: Strings and tuples the shared values hold, each once.
        self.strings: dict[Any, Any] = {}
        self._made: dict[int, Event] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__slots__ if name not in ("_made", "strings")}
        # The sources as three columns (the unpickler's memo would keep a tuple per Source read until the end).
        state["sources"] = tuple(map(list, zip(*self.sources.values, strict=True)))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        columns = state.pop("sources")
        for name, value in state.items():
            setattr(self, name, value)
        self.sources = Interned(list(map(Source._make, zip(*columns, strict=True))))
        self._made, self.strings = {}, {}

    def __len__(self) -> int:
        """How many slots hold a record."""
        return len(self.ts) - len(self.free)

    # --- records in

    def _share(self, value: Any) -> Any:
        return self.strings.setdefault(value, value)

    def source_of(self, agent: str, kind: str, path: str) -> int:
        """The position of this source (made when new)."""
        source = Source(self._share(agent), self._share(kind), self._share(path))
        k = self.sources.find(source)
        if k == -1:
            k = self.sources(source)
            self.decides.append(kind in self.decision_kinds)
        return k

    def shape_of(self, text: str, prompt: str | None, reason: str | None, alternatives: tuple[str, ...],
                 subject: tuple[str, ...], corrects: str | None, generation: int, *, reduced: bool = False) -> int:
        """The position of this shape, its text reduced to the vocabulary's phrases (unless ``reduced`` already)."""
        if not reduced and self.vocabulary is not None:
            text = reduce_text(text, self.vocabulary)
        share = self._share
        return self.shapes(Shape(share(text), share(prompt), share(reason), share(alternatives), share(subject),
                                 share(corrects), generation))

    def citations_of(self, citations: tuple[Citation, ...]) -> int:
        """The position of this list of citations, each citation held once."""
        if not citations:
            return 0
        share = self.strings.setdefault
        return self.citations(tuple(share(("citation", c), c) for c in citations))

    def add(self, record_id: str, us: int, source: int, line: int | None, thread: str | None, cited: int,
            shape: int) -> int:
        """A slot holding this record (``source``, ``cited`` and ``shape``: positions from the methods above)."""
        thread_at = self.threads(thread) if thread is not None else 0
        line = line or 0
        if source > _FITS or line > _FITS or thread_at > _FITS or cited > _FITS or shape > _FITS:
            self._widen(source=source, line=line, thread=thread_at, cited=cited, shape=shape)
        if self.free:
            slot = self.free.pop()
            self.ts[slot], self.source[slot], self.line[slot] = us, source, line
            self.thread[slot], self.cited[slot], self.shape[slot] = thread_at, cited, shape
            self.ids.put(slot, record_id)
            return slot
        self.ts.append(us)
        self.source.append(source)
        self.line.append(line)
        self.thread.append(thread_at)
        self.cited.append(cited)
        self.shape.append(shape)
        self.ids.put(len(self.ts) - 1, record_id)
        return len(self.ts) - 1

    def _widen(self, **values: int) -> None:
        """Four bytes a slot for the columns that are to hold one of these values past two."""
        for name, value in values.items():
            column = getattr(self, name)
            if value > _FITS and column.typecode == "H":
                setattr(self, name, array("I", column))

    def is_stub(self, kind: str, line: int | None) -> bool:
        """True for a heartbeat record no rule reads but through its time (not of a decision kind)."""
        return line is not None and kind not in self.decision_kinds

    def add_event(self, e: Event) -> int:
        """A slot holding ``e`` (its text reduced; a record of no decision kind keeps only what the model reads)."""
        source = self.source_of(e.agent, e.kind, e.path)
        if self.is_stub(e.kind, e.line):
            return self.add(e.id, to_us(e.ts), source, e.line, None, 0, self.shape_of("", None, None, (), (), None,
                                                                                     e.generation, reduced=True))
        shape = self.shape_of(e.text, e.prompt, e.reason, e.alternatives, e.subject, e.corrects, e.generation)
        return self.add(e.id, to_us(e.ts), source, e.line, e.thread, self.citations_of(e.citations), shape)

    def add_rows(self, rows: Iterable[tuple[Sequence[Any], Sequence[tuple[str, str]]]]) -> Iterator[int]:
        """Slots holding the events of these store rows (see :meth:`~scorers.live.visibility.Visibility.add_rows`)."""
        # Local to the call (a store's rows are read in one): the raw values hold whole texts.
        raw: dict[Any, int] = {}
        decision_kinds = self.decision_kinds
        sources: dict[tuple[str, str, str], int] = {}
        for r, pairs in rows:
            line, kind = r[6], r[4]
            key = (r[3], kind, r[5])
            source = sources.get(key)
            if source is None:
                if len(sources) >= SOURCES_HELD:
                    sources.clear()
                source = sources[key] = self.source_of(*key)
            if line and kind not in decision_kinds:
                yield self.add(r[1], r[2], source, line, None, 0, self._stub_shape(r[14]))
                continue
            shape_key = r[8:15]
            shape = raw.get(shape_key)
            if shape is None:
                if len(raw) >= RAW_HELD:
                    raw.clear()
                shape = raw[shape_key] = self.shape_of(r[8], r[9], r[10], from_json_list(r[11]),
                                                       from_json_list(r[12]), r[13], r[14])
            cited = 0
            if pairs:
                cited_key = ("cited", tuple(pairs))
                found = raw.get(cited_key)
                if found is None:
                    found = raw[cited_key] = self.citations_of(tuple(Citation(*p) for p in pairs))
                cited = found
            yield self.add(r[1], r[2], source, line or None, r[7], cited, shape)

    def _stub_shape(self, generation: int) -> int:
        return self.shape_of("", None, None, (), (), None, generation, reduced=True)

    def add_columns(self, c: Columns) -> Iterator[int]:
        """Slots holding the rows of these columns (their texts reduced already with this table's vocabulary)."""
        shapes = [self.shape_of(*s, reduced=True) for s in c.shapes]
        cited = [self.citations_of(tuple(Citation(*p) for p in pairs)) for pairs in c.citations]
        if not self.free:  # a load: new slots at the end, column by column (no slot let go to give first)
            return self._append_columns(c, shapes, cited)
        return self._add_columns(c, shapes, cited)

    def _append_columns(self, c: Columns, shapes: list[int], cited: list[int]) -> Iterator[int]:
        """:meth:`add_columns` into new slots: each column extended at once, through the chunk's tables."""
        values, first, n = c.values, len(self.ts), len(c.ids)
        names = cast("list[str]", values)  # (an agent, a kind, a path: never None)
        sources: dict[tuple[int, int, int], int] = {}
        source = array("I")
        for key in zip(c.agent_at, c.kind_at, c.path_at, strict=True):
            k = sources.get(key)
            if k is None:
                k = sources[key] = self.source_of(names[key[0]], names[key[1]], names[key[2]])
            source.append(k)
        stubs = {g: self._stub_shape(g) for g, k in zip(c.generation, c.shape_at, strict=True) if k == NO_SHAPE}
        threads = {v: 0 if (text := values[v]) is None else self.threads(text)
                   for v, k in zip(c.thread_at, c.shape_at, strict=True) if k != NO_SHAPE}
        shape, thread, line, cites = array("I"), array("I"), array("I"), array("I")
        for k, g, v, at, ln in zip(c.shape_at, c.generation, c.thread_at, c.citations_at, c.line, strict=True):
            line.append(ln)
            if k == NO_SHAPE:
                shape.append(stubs[g])
                thread.append(0)
                cites.append(0)
            else:
                shape.append(shapes[k])
                thread.append(threads[v])
                cites.append(cited[at])
        for name, column in (("source", source), ("line", line), ("thread", thread), ("cited", cites),
                             ("shape", shape)):
            if column:
                self._widen(**{name: max(column)})
            getattr(self, name).extend(array(getattr(self, name).typecode, column))
        self.ts.extend(c.us)
        put = self.ids.put
        for k, rid in enumerate(c.ids, first):
            put(k, rid)
        return iter(range(first, first + n))

    def _add_columns(self, c: Columns, shapes: list[int], cited: list[int]) -> Iterator[int]:
        values = c.values
        sources: dict[tuple[int, int, int], int] = {}
        for rid, us, agent, kind, path, thread, line, generation, shape, citations in zip(
                c.ids, c.us, c.agent_at, c.kind_at, c.path_at, c.thread_at, c.line, c.generation, c.shape_at,
                c.citations_at, strict=True):
            key = (agent, kind, path)
            source = sources.get(key)
            if source is None:
                source = sources[key] = self.source_of(values[agent], values[kind], values[path])
            if shape == NO_SHAPE:
                yield self.add(rid, us, source, line, None, 0, self._stub_shape(generation))
            else:
                yield self.add(rid, us, source, line or None, values[thread], cited[citations], shapes[shape])

    def release(self, slot: int) -> None:
        """Let go of the record in ``slot`` (the slot is given to a later record)."""
        self.ids.release(slot)
        self.free.append(slot)
        self._made.pop(slot, None)

    def vacuum(self) -> list[str]:
        """Let go of the shared values no held record names (the records let go behind the windows leave theirs: a
        month's documents, threads, shapes and citation lists each day). Each table holding more than twice the values
        its column names (and :data:`VACUUM_FROM` at least) is written again with those alone, in the same order, and
        its column renumbered; the strings they share are shared afresh. Returns the tables written again."""
        for s in self.free:  # a slot let go names nothing (its columns are written again when it is given)
            self.source[s] = self.thread[s] = self.cited[s] = self.shape[s] = 0
        done = []
        for column_name, table_name in _SHARED:
            column, table = getattr(self, column_name), getattr(self, table_name)
            named = sorted({0, *column})  # 0 kept: none (threads, citations), or the first source or shape
            if len(table) <= max(VACUUM_FROM, 2 * len(named)):
                continue
            renumbered = list(range(len(table)))
            for new, old in enumerate(named):
                renumbered[old] = new
            setattr(self, column_name, array(column.typecode, map(renumbered.__getitem__, column)))
            setattr(self, table_name, table.kept(named))
            if table_name == "sources":
                self.decides = bytearray(self.decides[k] for k in named)
            done.append(table_name)
        if done:
            self._share_again()
        return done

    def _share_again(self) -> None:
        """The strings dict of the values the tables hold now (those of values let go leave with them)."""
        self.strings = {}
        share = self._share
        for source in self.sources.values:
            for value in source:
                share(value)
        for shape in self.shapes.values:
            for value in shape[:-1]:
                share(value)
        for cited in self.citations.values:
            for c in cited:
                self.strings[("citation", c)] = c
        self._made.clear()

    # --- records out

    def live(self, slot: int) -> bool:
        """True when ``slot`` holds a record."""
        return self.ids.live(slot)

    def id(self, slot: int) -> str:
        """The record's id."""
        return self.ids.text(slot)

    def time(self, slot: int) -> datetime:
        """The record's time."""
        return from_us(self.ts[slot])

    def agent(self, slot: int) -> str:
        """Who wrote the record."""
        source: Source = self.sources.values[self.source[slot]]
        return source.agent

    def kind(self, slot: int) -> str:
        """The record's kind."""
        source: Source = self.sources.values[self.source[slot]]
        return source.kind

    def path(self, slot: int) -> str:
        """The file the record was read from."""
        source: Source = self.sources.values[self.source[slot]]
        return source.path

    def prompt(self, slot: int) -> str | None:
        """The decision's prompt (None for a record no rule reads)."""
        shape: Shape = self.shapes.values[self.shape[slot]]
        return shape.prompt

    def is_decision(self, slot: int) -> bool:
        """A Markdown decision, or a heartbeat record of a decision kind (spec 1.2)."""
        return self.line[slot] == 0 or bool(self.decides[self.source[slot]])

    def is_markdown(self, slot: int) -> bool:
        """A brief's or a finding's decision (no line)."""
        return self.line[slot] == 0

    def order(self, slot: int) -> Order:
        """The record's position in read order (spec section 1), as :attr:`Event.order`."""
        source: Source = self.sources.values[self.source[slot]]
        shape: Shape = self.shapes.values[self.shape[slot]]
        return (source.path, shape.generation, self.line[slot])

    def key(self, slot: int) -> Key:
        """(time, read order) flattened: what the model's indexes are sorted by (see :data:`Key`)."""
        source: Source = self.sources.values[self.source[slot]]
        shape: Shape = self.shapes.values[self.shape[slot]]
        return (self.ts[slot], source.path, shape.generation, self.line[slot])

    def bisect_left(self, slots: Sequence[int], key: Key) -> int:
        """``bisect.bisect_left(slots, key, key=self.key)`` for ``slots`` in key order: by time in the time column,
        then by the whole key among the slots of ``key``'s time only (seldom any: no key made per step)."""
        at = self.ts.__getitem__
        lo = bisect.bisect_left(slots, key[0], key=at)
        hi = bisect.bisect_right(slots, key[0], lo, key=at)
        return lo if lo == hi else bisect.bisect_left(slots, key, lo, hi, key=self.key)

    def in_key_order(self, slots: Iterable[int]) -> list[int]:
        """``slots`` sorted by :meth:`key`: by time, then each run of one time by the whole key (a key made for each
        of a million slots costs more than the sort)."""
        ts, out = self.ts, sorted(slots)  # (by number first: slots come nearly in time order, the next sort is quick)
        out.sort(key=ts.__getitem__)
        k, n = 0, len(out)
        while k < n:
            us, j = ts[out[k]], k + 1
            while j < n and ts[out[j]] == us:
                j += 1
            if j - k > 1:
                out[k:j] = sorted(out[k:j], key=self.key)
            k = j
        return out

    def event(self, slot: int) -> Event:
        """The :class:`Event` the record in ``slot`` stands for (one of the last made is given again)."""
        made = self._made
        e = made.get(slot)
        if e is not None:
            return e
        agent, kind, path = self.sources.values[self.source[slot]]
        text, prompt, reason, alternatives, subject, corrects, generation = self.shapes.values[self.shape[slot]]
        ids, thread = self.ids, self.thread[slot]
        stem = ids.stem[slot]  # Ids.text and Texts.text inlined: an Event is made for every decision a rule reads
        rid = f"{ids.stems[stem]}{ids.at[slot]}" if stem else ids.bytes_of(slot).decode()
        e = _new_event(Event, (rid, from_us(self.ts[slot]), agent, kind, path, self.line[slot] or None,
                               self.threads.ids.text(thread) if thread else None, text,
                               self.citations.values[self.cited[slot]], prompt, reason, alternatives, subject,
                               corrects, generation))
        if len(made) >= MADE_HELD:
            made.clear()
        made[slot] = e
        return e

    def events(self, slots: Sequence[int]) -> list[Event]:
        """:meth:`event` for each of ``slots``, made in one pass (their times made at once); the last ones kept."""
        sources, shapes, cited, cites = self.sources.values, self.shapes.values, self.cited, self.citations.values
        source_at, shape_at, line_at, thread_at, ts = self.source, self.shape, self.line, self.thread, self.ts
        stems, stem_at, number, bytes_of = self.ids.stems, self.ids.stem, self.ids.at, self.ids.bytes_of
        thread_of, made, out = self.threads.ids.text, self._made, []
        for s, when in zip(slots, from_us_many([ts[s] for s in slots]), strict=True):
            agent, kind, path = sources[source_at[s]]
            text, prompt, reason, alts, subject, corrects, generation = shapes[shape_at[s]]
            stem, thread = stem_at[s], thread_at[s]
            out.append(_new_event(Event, (f"{stems[stem]}{number[s]}" if stem else bytes_of(s).decode(), when, agent,
                                          kind, path, line_at[s] or None, thread_of(thread) if thread else None, text,
                                          cites[cited[s]], prompt, reason, alts, subject, corrects, generation)))
        if len(made) + min(len(out), MADE_HELD) > MADE_HELD:
            made.clear()
        made.update(zip(slots[-MADE_HELD:], out[-MADE_HELD:], strict=True))
        return out

    def forget_made(self) -> None:
        """Let go of the Events kept (see :meth:`event`)."""
        self._made.clear()
