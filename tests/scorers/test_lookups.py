"""The lookups both evaluation paths answer the rules with (scorers/lookups.py), against their plain readings."""

from __future__ import annotations

import bisect
import pickle
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from hypothesis import given
from hypothesis import strategies as st

from collectors.records import CheckResult, FileEntry, Order
from collectors.rfc3339 import to_us
from scorers.lookups import (
    NO_MODIFICATIONS,
    CurrentChecks,
    FileIndex,
    FileState,
    current_check,
    previous_in,
    sort_key,
)

T0 = datetime(2026, 5, 1, tzinfo=UTC)


class Rec(NamedTuple):
    ts: datetime
    order: Order


# Few distinct times and read orders: many records share a time, the case the fast path searches within.
_recs = st.builds(lambda s, line: Rec(T0 + timedelta(seconds=s), ("a.jsonl", 0, line)),
                  st.integers(0, 3), st.integers(0, 5))


@given(st.lists(_recs, max_size=12), _recs, st.booleans())
def test_previous_in_is_the_last_record_before(group: list[Rec], d: Rec, member: bool) -> None:
    group = sorted(set([*group, d] if member else group), key=sort_key)
    i = bisect.bisect_left(group, sort_key(d), key=sort_key)  # the plain reading: by (ts, order) throughout
    assert previous_in(group, d) == (group[i - 1] if i else None)


def test_previous_in_reads_the_order_among_records_of_one_time() -> None:
    a, b, c = (Rec(T0, ("a.jsonl", 0, line)) for line in (1, 2, 3))
    early = Rec(T0 - timedelta(seconds=1), ("a.jsonl", 0, 9))
    assert previous_in([early, a, b, c], c) == b
    assert previous_in([early, a, b, c], a) == early
    assert previous_in([a, b, c], a) is None


def test_current_check_ages_out_at_max_age() -> None:
    check = CheckResult("https://x", "url", T0, True)
    latest = {("url", "https://x"): check}
    age = timedelta(hours=1)
    assert current_check(latest, ("url", "https://x"), T0 + age - timedelta(microseconds=1), age) == check
    assert current_check(latest, ("url", "https://x"), T0 + age, age) is None
    assert current_check(latest, ("url", "https://y"), T0, age) is None
    assert CurrentChecks(latest, T0 + age, age).get(("url", "https://x")) is None


# Few paths and creation times: entries replaced, removed and sharing a time, the ties the columns order by path.
_puts = st.lists(st.tuples(st.sampled_from(["a.md", "b.md", "docs/c.md", "docs/d.md"]),
                           st.none() | st.integers(0, 3)), max_size=16)


@given(_puts, st.integers(-1, 4), st.integers(-1, 4))
def test_the_file_index_finds_the_files_created_in_a_span_as_a_plain_scan(
        puts: list[tuple[str, int | None]], a: int, b: int) -> None:
    """``put`` keeps the creation columns sorted by (created, path) as entries come, change and go; the files created
    in ``(a, b]`` are those a scan over every entry finds."""
    index, entries = FileIndex(), dict[str, datetime]()
    for path, h in puts:
        created = None if h is None else T0 + timedelta(hours=h)
        index.put(path, None if created is None else FileState(created, None))
        if created is None:
            entries.pop(path, None)
        else:
            entries[path] = created
    assert list(zip(index.created_us, index.created_paths, strict=True)) == sorted(
        (to_us(c), p) for p, c in entries.items())
    lo, hi, at = T0 + timedelta(hours=a), T0 + timedelta(hours=b), T0 + timedelta(hours=3)
    assert index.created_matching("*.md", lo, hi, "b.md", at) == sorted(
        p for p, c in entries.items() if lo < c <= min(hi, at) and "/" not in p and p != "b.md")


@given(_puts, _puts)
def test_putting_many_entries_at_once_makes_the_index_one_by_one_would(
        before: list[tuple[str, int | None]], batch: list[tuple[str, int | None]]) -> None:
    """``put_all`` (a load's, a rebuild's) leaves the same entries and creation columns as ``put`` of each entry in
    turn, onto an index already holding some: replaced, removed and new entries, ties in time."""
    def state(h: int | None) -> FileState | None:
        return None if h is None else FileState(T0 + timedelta(hours=h), None)

    one_by_one, at_once = FileIndex(), FileIndex()
    for path, h in before:
        f = state(h)
        one_by_one.put(path, f)
        at_once.put(path, f)
    states = {path: state(h) for path, h in batch}  # (the last of a path's puts: a mapping holds one each)
    for path, f in states.items():
        one_by_one.put(path, f)
    at_once.put_all(states)
    assert at_once.files == one_by_one.files
    assert at_once.created_us == one_by_one.created_us and at_once.created_paths == one_by_one.created_paths


# Entries by path: (created, deleted or None, modifications), in hours from T0.
_entries = st.dictionaries(st.sampled_from(["a.md", "b.md", "docs/c.md", "é.md"]) | st.text(max_size=4),
                           st.tuples(st.integers(-3, 3), st.none() | st.integers(-3, 5),
                                     st.lists(st.integers(-3, 6), max_size=3)), max_size=8)


@given(_entries)
def test_a_pickled_file_index_reads_back_entry_for_entry(entries: dict[str, tuple[int, int | None, list[int]]]
                                                         ) -> None:
    """A file index pickled (the model cache holds it as columns) reads back with every entry's creation, deletion
    and modifications (the shared empty sequence where there are none), in the same order, the creation columns and
    the symlinks: and answers as the original does."""
    def at(h: int) -> datetime:
        return T0 + timedelta(hours=h)

    index = FileIndex.of({p: FileEntry(p, at(c), tuple(map(at, m)), None if d is None else at(d))
                          for p, (c, d, m) in entries.items()}, {"link.md": "a.md"})
    copy = pickle.loads(pickle.dumps(index))

    def held(i: FileIndex) -> list[tuple[str, datetime, datetime | None, list[int], bool]]:
        return [(p, f.created, f.deleted, list(f.modified), f.modified is NO_MODIFICATIONS) for p, f in i.files.items()]

    assert held(copy) == held(index)
    assert copy.created_us == index.created_us and copy.created_paths == index.created_paths
    for path in [*entries, "link.md"]:
        for a, b in [(-4, 0), (0, 2), (2, 7)]:
            assert copy.exists(path, at(b), at(7)) == index.exists(path, at(b), at(7))
            assert copy.changed_in(path, at(a), at(b), at(7)) == index.changed_in(path, at(a), at(b), at(7))


def test_a_file_never_modified_holds_no_array() -> None:
    """Most files are never modified: their entry holds the shared empty sequence until a modification comes, and
    again once every modification was let go."""
    index = FileIndex.of({"a.md": FileEntry("a.md", T0), "b.md": FileEntry("b.md", T0, (T0 + timedelta(hours=2),))},
                         {})
    a, b = index.files["a.md"], index.files["b.md"]
    assert a.modified is NO_MODIFICATIONS and list(b.modified) == [to_us(T0 + timedelta(hours=2))]
    assert not index.changed_in("a.md", T0, T0 + timedelta(hours=5), T0 + timedelta(hours=5))
    assert a.add([T0 + timedelta(hours=3), T0 + timedelta(hours=1)]) == [T0 + timedelta(hours=1),
                                                                         T0 + timedelta(hours=3)]
    assert index.changed_in("a.md", T0 + timedelta(hours=2), T0 + timedelta(hours=3), T0 + timedelta(hours=5))
    assert not index.changed_in("a.md", T0 + timedelta(hours=1), T0 + timedelta(hours=2), T0 + timedelta(hours=5))
    a.drop_modified(to_us(T0 + timedelta(hours=1)))
    assert list(a.modified) == [to_us(T0 + timedelta(hours=3))]
    a.drop_modified(to_us(T0 + timedelta(hours=3)))
    assert a.modified is NO_MODIFICATIONS
