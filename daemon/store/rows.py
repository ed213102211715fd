"""How the store's records map to table rows and back: the column lists and the conversions in one place."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring_ascii
from typing import Any, NamedTuple

from collectors.citations import Citation
from collectors.jsonl import from_json_list
from collectors.records import Event
from collectors.rfc3339 import from_us, to_us


class Fingerprint(NamedTuple):
    """What a stat said of a file besides its size and mtime when its hash was last taken (migration 014), and when
    that stat was taken: what a scan compares to tell an unchanged file without reading it
    (daemon/ingest/fingerprint.py)."""

    ctime_ns: int
    dev: int
    ino: int
    #: The wall clock (ns since the epoch) before the stat: a change time not clearly older is "racy".
    seen_ns: int


@dataclass(frozen=True)
class IndexRow:
    """The stored file-index state of one path (what the next scan compares against).

    ``canonical`` is None for an entry of the file index (a file under its canonical path); else the row is a name
    through a symlink that a source is read under, and ``canonical`` the file it names: the row records what was
    read (its hash, its deletion), and is no entry of the index (migration 009).
    """

    path: str
    created: datetime
    deleted: datetime | None
    mtime_ns: int
    size: int
    sha: str | None
    front_matter: bool
    canonical: str | None = None
    #: The stat the hash was taken after (a file read whole), None where none is recorded: read it to know.
    fingerprint: Fingerprint | None = None


#: A row of the file index as a scan compares it (:meth:`Store.stats_in_order`): path, live and hashed (not deleted, a
#: sha), canonical, size, mtime_ns, then the fingerprint's ctime_ns, dev, ino and seen_ns (None before one is recorded).
StoredStat = tuple[str, bool, str | None, int, int, int | None, int | None, int | None, int | None]


EVENT_COLUMNS = (
    "path, generation, line, id, ts_us, agent, kind, thread, text, prompt, reason, alternatives, subject, corrects"
)


#: The ``events`` columns a reader selects, after the rowid: Event's fields in Event's order, its citations aside (they
#: come from their own table). What :func:`event_of` reads, and what the live model builds its records from without an
#: Event in between (scorers/live/visibility.py ``add_rows``).
READ_COLUMNS = (
    "id, ts_us, agent, kind, path, line, thread, text, prompt, reason, alternatives, subject, corrects, generation"
)
#: A row as read: the rowid, then :data:`READ_COLUMNS`.
ReadRow = tuple[Any, ...]


def event_of(r: ReadRow, cites: list[Citation]) -> Event:
    """An event from a row of ``rowid`` followed by :data:`READ_COLUMNS`."""
    return Event(r[1], from_us(r[2]), r[3], r[4], r[5], r[6] or None, r[7], r[8], tuple(cites), r[9], r[10],
                 from_json_list(r[11]), from_json_list(r[12]), r[13], r[14])


#: One ``events`` row in :data:`EVENT_COLUMNS` order, and one ``citations`` row.
EventRow = tuple[str, int, int, str, int, str, str, str | None, str, str | None, str | None, str, str, str | None]
CitationRow = tuple[str, int, int, int, str, str]


def event_rows(events: Iterable[Event]) -> tuple[list[EventRow], list[CitationRow]]:
    """The rows :meth:`Store.add_events` inserts for ``events``."""
    rows, cites, build = row_builder()
    # Unpacked rather than read by name: a batch may hold many.
    for (event_id, ts, agent, kind, path, line, thread, text, citations, prompt, reason, alternatives, subject,
         corrects, generation) in events:
        build(event_id, to_us(ts), agent, kind, path, line, thread, text, citations, prompt, reason, alternatives,
              subject, corrects, generation)
    return rows, cites


#: Adds one event's rows, given its fields in :class:`Event`'s order with the time in microseconds.
RowBuild = Callable[[str, int, str, str, str, "int | None", "str | None", str, "tuple[Citation, ...]", "str | None",
                     "str | None", "tuple[str, ...]", "tuple[str, ...]", "str | None", int], None]


def row_builder() -> tuple[list[EventRow], list[CitationRow], RowBuild]:
    """Empty lists of event and citation rows, and the function that adds one event's rows to them: the ingest hands
    it to :func:`collectors.jsonl.read_event` as the record's maker, so a line becomes rows with no Event between."""
    rows: list[EventRow] = []
    cites: list[CitationRow] = []
    add, cite = rows.append, cites.append

    def build(event_id: str, ts_us: int, agent: str, kind: str, path: str, line: int | None, thread: str | None,
              text: str, citations: tuple[Citation, ...], prompt: str | None, reason: str | None,
              alternatives: tuple[str, ...], subject: tuple[str, ...], corrects: str | None, generation: int) -> None:
        line = line or 0
        add((path, generation, line, event_id, ts_us, agent, kind, thread, text, prompt, reason,
             json_list(alternatives) if alternatives else "[]", json_list(subject) if subject else "[]", corrects))
        for i, (kind_, target) in enumerate(citations):
            cite((path, generation, line, i, kind_, target))

    return rows, cites, build


FILE_COLUMNS = "path, created_us, deleted_us, mtime_ns, size, sha, front_matter, canonical, ctime_ns, dev, ino, seen_ns"
#: The same for a store opened read-only before migration 014 (a daemon of an earlier version wrote it): no
#: fingerprints; and before 009: no names either.
FILE_COLUMNS_BEFORE_014 = FILE_COLUMNS.replace("ctime_ns, dev, ino, seen_ns", "NULL, NULL, NULL, NULL")
FILE_COLUMNS_BEFORE_009 = FILE_COLUMNS_BEFORE_014.replace("canonical", "NULL")


def index_row_of(r: tuple[Any, ...]) -> IndexRow:
    """An IndexRow from a row of :data:`FILE_COLUMNS`."""
    fingerprint = Fingerprint(r[8], r[9], r[10], r[11]) if r[8] is not None else None
    return IndexRow(r[0], from_us(r[1]), from_us(r[2]) if r[2] is not None else None, r[3], r[4], r[5], bool(r[6]),
                    r[7], fingerprint)


def json_list(items: tuple[str, ...]) -> str:
    """A tuple of strings as the JSON text a column holds: ``json.dumps(items)``, spelt out with json's own C escaper
    (json.dumps goes through three Python-level calls per list)."""
    return "[" + ", ".join(map(encode_basestring_ascii, items)) + "]" if items else "[]"


#: What ``Store.copy_rows`` may write, and with which columns (salvaged rows of tables nothing re-derives).
COPYABLE = {
    "labels": ("path", "generation", "line", "ts_us", "decision", "value", "reviewer"),
    "rejects": ("path", "generation", "line", "source", "reason", "snippet", "seen_us"),
    "checks": ("target", "type", "checked_us", "ok", "status", "detail"),
    "file_changes": ("path", "at_us"),
    "history": ("day", "agent", "window", "component", "passed", "counted", "pending", "decisions"),
}


def copy_columns(table: str) -> tuple[str, ...]:
    """The columns :meth:`Store.copy_rows` takes for ``table``."""
    return COPYABLE[table]
