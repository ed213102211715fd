"""The records as the live model holds them (scorers/live/table.py): a slot reads as the event it stands for, field by
field, one at a time or many in one pass; slots let go are given again and their ids' bytes compacted away; the ids'
index answers as a dict would; and a model holds no Python object per record."""

from __future__ import annotations

import bisect
import gc
import math
import pickle
import sys
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.citations import Citation
from collectors.records import Event
from collectors.rfc3339 import to_us
from scorers.live import LiveModel
from scorers.live import ids as ids_module
from scorers.live import table as table_module
from scorers.live.ids import EMPTY, IdIndex, Ids, SparseIdIndex, Texts
from scorers.live.interned import Interned
from scorers.live.table import Table
from tests.helpers import T0, ev
from tests.scorers.live.test_model import CFG

texts = st.text(max_size=6)
maybe = st.none() | texts
#: Ids of any length: the buffer holds each one's length before it, in one byte below 128 and in more past it; a stem
#: and a number (leading zeros, nine digits and more, no stem) are held without their text only when they read back
#: the same.
stemmed = st.from_regex(r"[a-zé-]{0,4}[0-9]{0,11}", fullmatch=True)
ids = st.text(max_size=3) | st.text(min_size=120, max_size=300) | stemmed
events = st.builds(
    Event, id=ids, ts=st.integers(-10**6, 10**6).map(lambda s: T0 + timedelta(seconds=s)), agent=texts,
    kind=st.sampled_from(["dm", "refusal", "commit"]), path=texts, line=st.none() | st.integers(1, 2**32 - 1),
    thread=maybe, text=texts, citations=st.lists(st.builds(Citation, texts, texts), max_size=2).map(tuple),
    prompt=maybe, reason=maybe, alternatives=st.lists(texts, max_size=2).map(tuple),
    subject=st.lists(texts, max_size=2).map(tuple), corrects=maybe, generation=st.integers(0, 3))
DECISIONS = frozenset({"dm", "refusal"})


def _as_held(e: Event) -> Event:
    """What the table gives back for ``e``: all of it, or for a record of no decision kind what the model reads."""
    if e.line is not None and e.kind not in DECISIONS:
        return Event(e.id, e.ts, e.agent, e.kind, e.path, e.line, generation=e.generation)
    return e


@settings(max_examples=200, deadline=None)
@given(st.lists(events, max_size=8), st.data())
def test_a_slot_reads_as_its_event_and_slots_let_go_are_given_again(records: list[Event], data: st.DataObject) -> None:
    table = Table(None, DECISIONS)
    slots = [table.add_event(e) for e in records]
    assert len(set(slots)) == len(slots) == len(table)
    for s, e in zip(slots, records, strict=True):
        assert table.event(s) == _as_held(e)
        assert (table.id(s), table.time(s), table.order(s)) == (e.id, e.ts, e.order)
        assert table.is_decision(s) == (e.line is None or e.kind in DECISIONS)
    table.forget_made()
    assert table.events(slots) == [_as_held(e) for e in records]  # made in one pass, as one by one
    gone = data.draw(st.sets(st.sampled_from(slots))) if slots else set()
    for s in gone:
        table.release(s)
    table.forget_made()
    assert not any(table.live(s) for s in gone) and len(table) == len(slots) - len(gone)
    again = [table.add_event(e) for e in records]
    assert set(gone) <= set(again)  # the slots let go are given first
    kept = [(s, e) for s, e in zip(slots, records, strict=True) if s not in gone] + list(zip(again, records,
                                                                                              strict=True))
    table.forget_made()
    for s, e in kept:
        assert table.event(s) == _as_held(e)
    assert table.events([s for s, _ in kept]) == [_as_held(e) for _, e in kept]
    copy = pickle.loads(pickle.dumps(table))
    assert [copy.event(s) for s, _ in kept] == [_as_held(e) for _, e in kept]


@settings(max_examples=300, deadline=None)
@given(st.lists(stemmed | st.text(max_size=4), max_size=40), st.data())
def test_ids_read_back_as_put_and_a_stem_and_number_take_no_buffer(texts: list[str], data: st.DataObject) -> None:
    ids = Ids()
    for k, text in enumerate(texts):
        ids.put(k, text)
    assert [ids.text(k) for k in range(len(texts))] == texts
    assert [ids.bytes_of(k) for k in range(len(texts))] == [t.encode() for t in texts]
    in_buffer = [t for t, stem in zip(texts, ids.stem, strict=True) if not stem]
    assert len(ids.blob) == sum(len(t.encode()) + 1 for t in in_buffer)
    for k, text in enumerate(texts):  # held without its text exactly when it is a stem and a plain number
        stem = text.rstrip("0123456789")
        digits = text[len(stem):]
        assert bool(ids.stem[k]) == (stem != "" and 0 < len(digits) <= 9 and str(int(digits)) == digits)
    gone = data.draw(st.sets(st.sampled_from(range(len(texts))))) if texts else set()
    for k in gone:
        ids.release(k)
    again = pickle.loads(pickle.dumps(ids))
    for k in gone:
        again.put(k, texts[-1 - k])
    assert [again.text(k) for k in range(len(texts))] == [texts[-1 - k] if k in gone else t
                                                          for k, t in enumerate(texts)]


def test_ids_past_the_stems_held_go_to_the_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids_module, "STEMS_HELD", 3)
    ids = Ids()
    for k, text in enumerate(["a1", "b2", "c3", "a4"]):
        ids.put(k, text)
    assert ids.stems == ["", "a", "b"] and list(ids.stem) == [1, 2, 0, 1]
    assert [ids.text(k) for k in range(4)] == ["a1", "b2", "c3", "a4"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=3) | stemmed, max_size=60))
def test_texts_number_strings_as_a_dict_would(values: list[str]) -> None:
    """Positions from 1 in order of first sight (0 is None's), whether found among the recent or in the index."""
    texts, expected = Texts(), dict[str, int]()
    for v in values:
        assert texts(v) == expected.setdefault(v, len(expected) + 1)
        if len(expected) % 5 == 0:
            texts._recent.clear()
    assert texts.values == [None, *expected] and texts.text(0) is None
    copy = pickle.loads(pickle.dumps(texts))
    assert [copy(v) for v in values] == [expected[v] for v in values] and len(copy) == len(expected) + 1


def test_a_load_s_threads_are_remembered_until_the_first_evaluation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh model remembers every thread it is given (a store's records come in time order, agents interleaved);
    its first evaluation lets go of them, and from then on only the last few are remembered."""
    monkeypatch.setattr(ids_module, "RECENT_HELD", 4)
    model = LiveModel(CFG)
    model.add_events(ev(f"d{i}", T0 - timedelta(minutes=i), thread=f"t{i}", line=i + 1) for i in range(10))
    threads = model._table.threads
    assert len(threads._recent) == 10
    model.evaluate(T0)
    assert not threads._recent
    model.add_events(ev(f"e{i}", T0, thread=f"u{i}", line=100 + i) for i in range(6))
    assert len(threads._recent) <= 4 and threads.values == [None, *(f"t{i}" for i in range(10)),
                                                           *(f"u{i}" for i in range(6))]


@settings(max_examples=200, deadline=None)
@given(st.lists(events, max_size=12), st.data())
def test_a_vacuum_keeps_the_values_held_records_name_and_only_those(records: list[Event], data: st.DataObject) -> None:
    """Records let go leave their values behind until a vacuum: then each table holds the values its column names
    (and its first), every held slot reads as before, and records added later share the values kept."""
    table = Table(None, DECISIONS)
    slots = [table.add_event(e) for e in records]
    gone = data.draw(st.sets(st.sampled_from(slots))) if slots else set()
    for s in gone:
        table.release(s)
    table_module.VACUUM_FROM, before = 0, table_module.VACUUM_FROM
    try:
        table.vacuum()
    finally:
        table_module.VACUUM_FROM = before
    table.forget_made()
    held = [(s, e) for s, e in zip(slots, records, strict=True) if s not in gone]
    assert [table.event(s) for s, _ in held] == [_as_held(e) for _, e in held]
    for column, values in (("source", "sources"), ("thread", "threads"), ("cited", "citations"), ("shape", "shapes")):
        named = {0, *(getattr(table, column)[s] for s, _ in held)}
        assert len(getattr(table, values)) <= 2 * len(named), column
    sizes = [len(table.sources), len(table.shapes), len(table.citations), len(table.threads)]
    again = [table.add_event(e) for _, e in held]
    assert [len(table.sources), len(table.shapes), len(table.citations), len(table.threads)] == sizes
    assert [table.event(s) for s in again] == [_as_held(e) for _, e in held]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 40)), max_size=120))
def test_interned_values_are_numbered_as_a_dict_would(values: list[tuple[str, int]]) -> None:
    """Positions in order of first sight through growth of the index, -1 for a value not held, the same after a
    pickle (the index is made again) and after keeping some."""
    interned, expected = Interned(), dict[tuple[str, int], int]()
    for v in values:
        assert interned(v) == expected.setdefault(v, len(expected))
    assert interned.values == list(expected) and interned.find(("d", 0)) == -1
    copy = pickle.loads(pickle.dumps(interned))
    assert [copy.find(v) for v in expected] == list(expected.values())
    every_other = list(expected)[::2]
    kept = copy.kept(range(0, len(expected), 2))
    assert [kept.find(v) for v in every_other] == list(range(len(every_other))) == list(range(len(kept)))
    assert all(kept.find(v) == -1 for v in list(expected)[1::2])


def test_the_ids_buffer_is_compacted_once_more_than_half_of_it_is_let_go() -> None:
    table = Table(None, DECISIONS)
    slots = [table.add_event(ev(f"id-{i:05d}" * 20, T0, line=i + 1)) for i in range(300)]
    size = len(table.ids.blob)
    for s in slots[:150]:
        table.release(s)
    assert len(table.ids.blob) == size and table.ids.garbage == size // 2  # half: not yet
    table.release(slots[150])
    assert len(table.ids.blob) == size // 300 * 149 and table.ids.garbage == 0  # past half: the 149 ids left, alone
    for s in slots[151:200]:
        table.release(s)
    table.forget_made()
    assert [table.id(s) for s in slots[200:]] == [f"id-{i:05d}" * 20 for i in range(200, 300)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "put", "claim_all", "remove"]), st.integers(0, 60)),
                max_size=200))
def test_the_id_index_answers_as_a_dict_would(ops: list[tuple[str, int]]) -> None:
    """Puts, claims (each slot wins its id unless one does), replacements and removals (backward-shift deletion, growth
    past its load) agree with a dict. The ids are few, so their CRCs share the table's low bits and every probe
    sequence is long."""
    table = Table(None, DECISIONS)
    index, expected = IdIndex(table.ids), {}
    for op, n in ops:
        rid = f"r{n}"
        if op == "put":
            s = table.add_event(ev(rid, T0, line=n + 1))
            index.put(rid, s)
            expected[rid] = s
        elif op == "claim_all":  # three records: the first and the last of one id, another id's between
            slots = [table.add_event(ev(r, T0, line=n + 1)) for r in (rid, f"q{n}", rid)]
            found = {s: w for s, w in index.claim_all(slots)}
            first = expected.setdefault(rid, slots[0])
            other = expected.setdefault(f"q{n}", slots[1])
            assert found == {s: w for s, w in zip(slots, (first, other, first), strict=True) if s != w}
        else:
            index.remove(rid)
            expected.pop(rid, None)
        assert len(index) == len(expected)
    assert {r: index.get(r) for n in range(61) for r in (f"r{n}", f"q{n}") if r in index} == expected
    assert all(index.get(r) == EMPTY for n in range(61) for r in (f"r{n}", f"q{n}") if r not in expected)
    assert sorted(index.values()) == sorted(expected.values())


def _reachable(root: object) -> list[object]:
    """Every object reachable from ``root`` (but classes, modules and functions)."""
    seen: set[int] = set()
    out: list[object] = []
    stack = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (type, type(sys), type(_reachable))):
            continue
        seen.add(id(o))
        out.append(o)
        stack.extend(gc.get_referents(o))
    return out


def test_a_model_holds_no_object_per_decision() -> None:
    """A thousand decisions of ten agents, evaluated: the model holds no Event, no id string and no time of theirs,
    only columns (the values they share are few); what the rules were given is let go after the evaluation."""
    model = LiveModel(CFG)
    model.add_events(ev(f"d{i}", T0 - timedelta(minutes=i), agent=f"agent{i % 10}", thread=f"t{i % 7}",
                        text="No data yet: see [source:docs/a.md]", prompt=f"p{i % 3}", line=i + 1)
                     for i in range(1000))
    model.evaluate(T0)
    model._table.forget_made()
    held = _reachable(vars(model))
    assert not [o for o in held if isinstance(o, Event)]
    assert not [o for o in held if type(o) is str and o.startswith("d") and o[1:].isdigit()]
    assert len([o for o in held if isinstance(o, datetime)]) < 20
    assert len(held) < 2000


def test_columns_take_four_bytes_from_the_first_value_past_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """Positions and lines are held in two bytes while they fit (most stores), and a column widens when a value does
    not (a line past 65,535; more distinct threads, citations, shapes or sources), the values held before kept."""
    table = Table(None, DECISIONS)
    first = table.add_event(ev("a", T0, line=7, thread="t0"))
    assert {table.line.typecode, table.thread.typecode, table.source.typecode} == {"H"}
    far = table.add_event(ev("b", T0, line=70_000, thread="t0"))
    assert table.line.typecode == "I" and table.thread.typecode == "H"
    monkeypatch.setattr(table_module, "_FITS", 2)  # the positional tables' boundary, reached with a few values
    more = [table.add_event(ev(f"c{i}", T0, agent=f"agent{i}", line=i + 1, thread=f"t{i}")) for i in range(4)]
    assert table.thread.typecode == table.source.typecode == "I" and table.shape.typecode == "H"
    assert [table.event(s).line for s in (first, far)] == [7, 70_000]
    assert [(table.event(s).agent, table.event(s).thread) for s in more] == [(f"agent{i}", f"t{i}") for i in range(4)]


def test_an_index_made_for_its_ids_holds_them_without_growing() -> None:
    """An index made for n ids (a rebuild's winners) takes n / FILL entries, not the next power of two, and grows only
    past GROW of them, by half."""
    table = Table(None, DECISIONS)
    slots = [table.add_event(ev(f"r{n}", T0, line=n + 1)) for n in range(1000)]
    index = IdIndex(table.ids, len(slots))
    for s in slots:
        index.put(table.id(s), s)
    assert index.size == math.ceil(1000 / ids_module.FILL) < 2048
    more = [table.add_event(ev(f"q{n}", T0, line=n + 1)) for n in range(300)]
    for s in more:
        index.put(table.id(s), s)
    assert index.size == math.ceil(1000 / ids_module.FILL) * 3 // 2
    assert all(index.get(table.id(s)) == s for s in slots + more)


def test_a_sparse_index_stays_at_most_four_tenths_full() -> None:
    """The labels' index (asked about every decision, holding one in eight) grows past 40 % full, by half: between
    27 % and 40 % once grown, and it answers as the dense one does."""
    table = Table(None, DECISIONS)
    sparse, dense = SparseIdIndex(table.ids), IdIndex(table.ids)
    for n in range(3000):
        s = table.add_event(ev(f"r{n}", T0, line=n + 1))
        sparse.put(table.id(s), s)
        dense.put(table.id(s), s)
        assert sparse.count <= 0.4 * sparse.size
        if n > 100:
            assert sparse.count >= 0.4 / 1.5 * sparse.size - 1
    assert dense.count > 0.5 * dense.size
    assert all(sparse.get(f"{p}{n}") == dense.get(f"{p}{n}") for n in range(3100) for p in "rq")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(1, 3)),
                max_size=40))
def test_slots_in_key_order_sort_as_by_the_whole_key(records: list[tuple[int, str, int, int]]) -> None:
    """Sorted by time first and each run of one time by the whole key: the same order as sorting by the key (few
    times, paths, generations and lines: many ties at every level)."""
    table = Table(None, DECISIONS)
    slots = [table.add_event(ev(f"r{k}", T0 + timedelta(seconds=sec), path=path, generation=gen, line=line))
             for k, (sec, path, gen, line) in enumerate(records)]
    slots.reverse()
    assert [table.key(s) for s in table.in_key_order(slots)] == sorted(table.key(s) for s in slots)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(1, 3)),
                max_size=40),
       st.tuples(st.integers(-1, 5), st.sampled_from(["", "a", "ab", "b", "c"]), st.integers(-1, 3), st.integers(0, 4)))
def test_bisect_left_finds_what_a_search_by_the_whole_key_does(records: list[tuple[int, str, int, int]],
                                                               probe: tuple[int, str, int, int]) -> None:
    """The time column first, the whole key among one time's slots: the position bisecting by the key gives, for keys
    held and keys between them (many ties at every level)."""
    table = Table(None, DECISIONS)
    slots = table.in_key_order(table.add_event(ev(f"r{k}", T0 + timedelta(seconds=sec), path=path, generation=gen,
                                                  line=line))
                               for k, (sec, path, gen, line) in enumerate(records))
    sec, path, gen, line = probe
    keys = [(to_us(T0 + timedelta(seconds=sec)), path, gen, line)] + [table.key(s) for s in slots]
    for key in keys:
        assert table.bisect_left(slots, key) == bisect.bisect_left(slots, key, key=table.key)
