"""Stored rows as a few flat columns: how a cold load's reading, done in another process, reaches the model.

A model's first load reads every stored event (a million rows) and reduces each decision's text to its phrases: most of
a cold start's load, and none of it needs the model. :func:`columns_of` does that part wherever the rows are read
(daemon/coldread.py runs it in a process of its own), and gives back columns that cost little to send: the times and
line numbers as machine integers, the repeated values (agents, kinds, paths, threads, a decision's shape with its text
already reduced, its citations) once each in a table with an index per row. The model builds its records from them
(:meth:`~scorers.live.visibility.Visibility.add_columns`) as :meth:`~scorers.live.visibility.Visibility.add_rows`
builds them from the rows.
"""

from __future__ import annotations

import bisect
import itertools
from array import array
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any, NamedTuple

from collectors.jsonl import from_json_list
from scorers.live.records import Vocabulary, reduce_text

#: In :attr:`Columns.shape`: the row is no decision (a stub, no shape).
NO_SHAPE = -1
#: A decision's shared fields as sent: (reduced text, prompt, reason, alternatives, subject, corrects, generation).
RawShape = tuple[str, str | None, str | None, tuple[str, ...], tuple[str, ...], str | None, int]


class Columns(NamedTuple):
    """Rows of the ``events`` table (and their citations) as columns, in the order read. Each ``*_at`` column holds,
    per row, an index into the table beside it."""

    #: Each row's rowid, ascending.
    rowid: array[int]
    ids: list[str]
    #: Times, microseconds since the epoch.
    us: array[int]
    #: The agents, kinds, paths and threads, each distinct value once.
    values: list[str | None]
    agent_at: array[int]
    kind_at: array[int]
    path_at: array[int]
    thread_at: array[int]
    line: array[int]
    generation: array[int]
    shapes: list[RawShape]
    #: :data:`NO_SHAPE` for a row that is no decision.
    shape_at: array[int]
    #: Each distinct list of (type, target) citation pairs once; the first is the empty one.
    citations: list[tuple[tuple[str, str], ...]]
    citations_at: array[int]


def columns_of(rows: Iterable[tuple[Sequence[Any], Sequence[tuple[str, str]]]], vocabulary: Vocabulary | None,
               decision_kinds: Collection[str]) -> Columns:
    """The columns of these rows (as the store's ``_select_rows`` gives them: the rowid and READ_COLUMNS, then the
    citation pairs), each decision's text reduced to the phrases of ``vocabulary`` (None: kept whole). A heartbeat
    row whose kind is not among ``decision_kinds`` is no decision: its text, prompt and the rest are not kept."""
    batch = list(rows)
    if not batch:
        return Columns(array("q"), [], array("q"), [], array("i"), array("i"), array("i"), array("i"), array("q"),
                       array("q"), [], array("i"), [()], array("i"))
    read = [r for r, _ in batch]
    # Column by column, in C where it can be: a value's index is its first appearance's number.
    fields = list(zip(*(r[:15] for r in read), strict=True))
    value_at: defaultdict[str | None, int] = defaultdict(itertools.count().__next__)
    at = value_at.__getitem__
    agent_at, kind_at, path_at, thread_at = (array("i", map(at, fields[k])) for k in (3, 4, 5, 7))
    shape_at = array("i")
    shape_of: defaultdict[RawShape, int] = defaultdict(itertools.count().__next__)
    raw_shapes: dict[tuple[Any, ...], int] = {}
    for r, line, kind in zip(read, fields[6], fields[4], strict=True):
        if line and kind not in decision_kinds:
            shape_at.append(NO_SHAPE)
            continue
        raw = tuple(r[8:15])
        k = raw_shapes.get(raw)
        if k is None:  # texts repeat: each distinct raw shape is reduced once
            text = r[8] if vocabulary is None else reduce_text(r[8], vocabulary)
            k = raw_shapes[raw] = shape_of[(text, r[9], r[10], from_json_list(r[11]), from_json_list(r[12]), r[13],
                                            r[14])]
        shape_at.append(k)
    cited: defaultdict[tuple[tuple[str, str], ...], int] = defaultdict(itertools.count().__next__)
    cited[()]  # the empty list first: index 0
    citations_at = array("i", [cited[tuple(pairs)] if pairs else 0 for _, pairs in batch])
    return Columns(array("q", fields[0]), list(fields[1]), array("q", fields[2]), list(value_at), agent_at, kind_at,
                   path_at, thread_at, array("q", fields[6]), array("q", fields[14]), list(shape_of), shape_at,
                   list(cited), citations_at)


#: The per-row columns of :class:`Columns` (the others are the tables they index).
_PER_ROW = ("rowid", "ids", "us", "agent_at", "kind_at", "path_at", "thread_at", "line", "generation", "shape_at",
            "citations_at")


def since(c: Columns, rowid: int) -> Columns:
    """The rows of ``c`` after ``rowid`` (their tables unchanged): what is left of a chunk whose first rows were read
    elsewhere too."""
    k = bisect.bisect_right(c.rowid, rowid)
    return c if k == 0 else c._replace(**{name: getattr(c, name)[k:] for name in _PER_ROW})
