"""Records as the live model holds them (scorers/live/records.py): a packed decision reads as the event it stands
for, field by field, and costs fewer references; decisions that share their rarely-varying fields share one tuple."""

from __future__ import annotations

import pickle
import sys
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.citations import Citation
from collectors.records import Event
from scorers.live import LiveModel
from scorers.live.records import PACKED_LAYOUT, SHAPE_FIELDS, Packed, Shape, Source, pack
from tests.helpers import T0, ev
from tests.scorers.live.test_model import CFG

texts = st.text(max_size=6)
maybe = st.none() | texts
events = st.builds(
    Event, id=texts, ts=st.integers(-10**6, 10**6).map(lambda s: T0 + timedelta(seconds=s)), agent=texts,
    kind=texts, path=texts, line=st.none() | st.integers(0, 10**6), thread=maybe, text=texts,
    citations=st.lists(st.builds(Citation, texts, texts), max_size=2).map(tuple), prompt=maybe, reason=maybe,
    alternatives=st.lists(texts, max_size=2).map(tuple), subject=st.lists(texts, max_size=2).map(tuple),
    corrects=maybe, generation=st.integers(0, 3))


def _packed(e: Event) -> Packed:
    return pack(e.id, e.ts, Source(e.agent, e.kind, e.path), e.line, e.thread, e.citations,
                Shape(*(getattr(e, f) for f in SHAPE_FIELDS)))


@settings(max_examples=200, deadline=None)
@given(events)
def test_a_packed_record_reads_as_its_event(e: Event) -> None:
    p = _packed(e)
    assert isinstance(p, Event)
    assert {f: getattr(p, f) for f in Event._fields} == e._asdict()
    assert (p.order, p.location) == (e.order, e.location)
    assert p.event() == e and p._asdict() == e._asdict() and repr(p) == f"Packed({e!r})"
    assert p._replace(text="changed") == e._replace(text="changed")
    again = pickle.loads(pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(again) is Packed and again == p and again.event() == e


def test_the_model_holds_decisions_packed_with_shared_shapes() -> None:
    """Decisions differing only in id, time, line and thread hold one tuple for their agent, kind and path and one for
    the rest, and each holds 7 references where an event holds 15 (a tuple of 9 would take 16 bytes more)."""
    model = LiveModel(CFG)
    model.add_events([ev(f"d{i}", T0 - timedelta(minutes=i), text="No data yet.", thread=f"t{i}", line=i + 1)
                      for i in range(3)])
    model.evaluate(T0)
    held = model.records()
    assert all(type(r) is Packed for r in held)
    for slot in ("source", "shape"):
        assert len({id(tuple.__getitem__(r, PACKED_LAYOUT.index(slot))) for r in held}) == 1
    assert sys.getsizeof(held[0]) == sys.getsizeof(tuple(range(7))) < sys.getsizeof(tuple(range(9)))
