"""``honestyd store check`` and ``honestyd store rebuild``: tell a damaged store, and make a sound one from it.

A rebuild moves the damaged file aside (``<db>.damaged-<time>``, its ``-wal`` and ``-shm`` with it), creates a fresh
store, and fills it from two places:

* the state root, by a full ingest (everything still on disk: logs from their first line, briefs, findings, labels
  files, reports), exactly as ``honestyd ingest`` into an empty database;
* the damaged file, read row by row around what cannot be read (:class:`daemon.store.Salvage`), for what no ingest
  can find again: the link checks, the daily history, the file index's observations (when a file was first seen,
  modified, deleted), and the lines of logs that are no longer on disk (rotated away and deleted, or deleted). Those
  lines keep their place in read order before the logs' current files: a log's older generations are renumbered
  below zero (generation ``g`` of a log whose newest was ``G`` becomes ``g - G - 1``), and the current file is read
  again as generation 0.

Everything else (cursors, rejects of files on disk, reports, the change feed, the store's id) is re-derived, and the
model cache of the old store is deleted (it could not be used with the new one anyway).
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.rfc3339 import from_us
from collectors.statedir import FileInfo, walk
from daemon import modelcache
from daemon.config import Config
from daemon.ingest import Clock, Ingester, IngestStats, system_clock
from daemon.store import CitationRow, EventRow, IndexRow, Salvage, Store, copy_columns, quick_check

#: The columns of the events table, in :data:`daemon.store.EventRow` order, and the types a sound row holds.
_EVENT_COLUMNS = ("path", "generation", "line", "id", "ts_us", "agent", "kind", "thread", "text", "prompt", "reason",
                  "alternatives", "subject", "corrects")
_EVENT_TYPES = (str, int, int, str, int, str, str, (str, None), str, (str, None), (str, None), str, str, (str, None))
_LABEL_TYPES = (str, int, int, int, str, str, str)
_REJECT_TYPES = (str, int, int, str, str, str, int)
_CHECK_TYPES = (str, str, int, (int, None), (int, None), str)
_HISTORY_TYPES = (str, str, str, str, int, int, int, int)
_FILE_COLUMNS = ("path", "created_us", "deleted_us", "mtime_ns", "size", "sha", "front_matter")
_FILE_TYPES = (str, int, (int, None), int, int, (str, None), int)
_CURSOR_COLUMNS = ("path", "dev", "ino", "generation")
#: The JSON Lines tables whose rows carry a (path, generation, line) position.
_POSITIONED = ("events", "labels", "rejects")
_CHUNK = 2000


@dataclass(frozen=True)
class CheckReport:
    """What ``store check`` found: no problems means a sound honestyd store."""

    path: Path
    problems: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)


def check(db: Path) -> CheckReport:
    """Run SQLite's integrity check on ``db`` and read its row counts (read-only; safe while a daemon runs)."""
    problems = quick_check(db, thorough=True)
    counts: dict[str, int] = {}
    if not problems:
        try:
            with Store.open(db, readonly=True) as store:
                if "migrations" not in store.tables():
                    return CheckReport(db, ("not an honestyd store (no migrations table)",))
                counts = store.counts()
        except sqlite3.DatabaseError as exc:  # a table missing, or what the check did not find: the answer
            return CheckReport(db, (str(exc),))
    return CheckReport(db, tuple(problems), counts)


@dataclass
class RebuildReport:
    """What a rebuild kept, gave up and re-derived."""

    aside: Path
    kept: Counter[str] = field(default_factory=Counter)
    #: Rows read but refused (wrong types: a damaged page that still parsed), by table.
    bad: Counter[str] = field(default_factory=Counter)
    #: table → runs of rowids that could not be read (first, last; None: to the end).
    lost: dict[str, list[tuple[int, int | None]]] = field(default_factory=dict)
    ingest: IngestStats = field(default_factory=IngestStats)
    counts: dict[str, int] = field(default_factory=dict)


def move_aside(db: Path, at: datetime) -> Path:
    """Rename ``db`` (with its ``-wal`` and ``-shm``, which SQLite finds by name) to ``<db>.damaged-<time>``, and
    delete the old store's model cache; returns the new name."""
    stamp = at.strftime("%Y%m%dT%H%M%SZ")
    aside = db.with_name(f"{db.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        aside = db.with_name(f"{db.name}.damaged-{stamp}-{n}")
        n += 1
    os.rename(db, aside)
    for suffix in ("-wal", "-shm"):
        side = db.with_name(db.name + suffix)
        if side.exists():
            os.rename(side, aside.with_name(aside.name + suffix))
    cache = modelcache.path_for(db)
    cache.unlink(missing_ok=True)
    modelcache.tmp_path_for(cache).unlink(missing_ok=True)
    return aside


def rebuild(db: Path, root: Path, config: Config, clock: Clock = system_clock) -> RebuildReport:
    """Move ``db`` aside and build a fresh store from the state root and what the old file still holds (see the
    module). The caller holds the store's lock and has checked that ``db`` exists and ``root`` is a folder."""
    aside = move_aside(db, clock())
    report = RebuildReport(aside)
    on_disk = {info.path: info for info in walk(root)}
    with Salvage.open(aside) as old, Store.open(db) as store:
        ingester = Ingester(store, root, config, clock)
        logs = {p: i for p, i in on_disk.items() if ingester.source_of(p) in ("heartbeats", "labels")}
        _copy_positioned(old, store, logs, report)
        report.ingest = ingester.scan()
        _copy_file_index(old, store, set(on_disk), clock(), report)
        _copy_table(old, store, "checks", _CHECK_TYPES, report)
        _copy_table(old, store, "history", _HISTORY_TYPES, report)
        report.lost = {t: runs for t, runs in old.lost.items() if runs}
        report.counts = store.counts()
    return report


# --- the lines of logs: what the ingest cannot read again


def _newest_generations(old: Salvage) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """Per path, the newest generation the old store knew (its cursor's, or its rows'), and the cursor's file."""
    newest: dict[str, int] = {}
    identity: dict[str, tuple[int, int]] = {}
    for _, path, dev, ino, generation in old.rows("cursors", _CURSOR_COLUMNS):
        if isinstance(path, str) and isinstance(generation, int):
            newest[path] = max(newest.get(path, generation), generation)
            identity[path] = (int(dev), int(ino))
    for table in _POSITIONED:
        for _, path, generation in old.rows(table, ("path", "generation")):
            if isinstance(path, str) and isinstance(generation, int):
                newest[path] = max(newest.get(path, generation), generation)
    # Cursors are re-derived: an unreadable one only costs the identity check. The other runs are found again, and
    # recorded, by the copying pass.
    for table in ("cursors", *_POSITIONED):
        old.lost.pop(table, None)
    return newest, identity


@dataclass(frozen=True)
class _Generations:
    """Which rows of a log the ingest reads again, and the generation the others get (see the module)."""

    newest: dict[str, int]
    identity: dict[str, tuple[int, int]]
    logs: dict[str, FileInfo]

    def kept(self, path: str, generation: int, line: int) -> int | None:
        """The generation a row gets in the new store, or None when the ingest reads it again (or it is a
        whole-file row: a brief's decision or a file's reject, which follow the file as it is now)."""
        if line <= 0:
            return None
        top = self.newest[path]
        info = self.logs.get(path)
        held = self.identity.get(path)
        if generation == top and info is not None and (held is None or held == (info.dev, info.ino)):
            return None
        return generation - top - 1


def _copy_positioned(old: Salvage, store: Store, logs: dict[str, FileInfo], report: RebuildReport) -> None:
    """The events (with their citations), labels and line rejects of log generations that are not on disk now."""
    generations = _Generations(*_newest_generations(old), logs)
    with store.transaction():
        _copy_events(old, store, generations, report)
        for table, types in (("labels", _LABEL_TYPES), ("rejects", _REJECT_TYPES)):
            batch: list[tuple[Any, ...]] = []
            for row in old.rows(table, copy_columns(table)):
                values = row[1:]
                if not _typed(values, types):
                    report.bad[table] += 1
                    continue
                new = generations.kept(*values[:3])
                if new is not None:  # else read again from the state root
                    batch.append((values[0], new, *values[2:]))
            report.kept[table] += store.copy_rows(table, batch)


def _copy_events(old: Salvage, store: Store, generations: _Generations, report: RebuildReport) -> None:
    rows: list[EventRow] = []
    cites: list[CitationRow] = []
    for row in old.rows("events", _EVENT_COLUMNS):
        values = row[1:]
        if not _typed(values[:3], _EVENT_TYPES[:3]):
            report.bad["events"] += 1
            continue
        path, generation, line = values[0], values[1], values[2]
        new = generations.kept(path, generation, line)
        if new is None:
            continue  # read again from the state root
        found = old.citations(path, generation, line)
        # Only the rows kept need all their columns sound; an event without its citations would score as one that
        # cites nothing.
        if found is None or not _typed(values, _EVENT_TYPES):
            report.bad["events"] += 1
            continue
        rows.append((path, new, line, *values[3:]))
        cites.extend((path, new, line, seq, kind, target) for seq, kind, target in found)
        if len(rows) >= _CHUNK:
            report.kept["events"] += store.add_event_rows(rows, cites)
            rows, cites = [], []
    report.kept["events"] += store.add_event_rows(rows, cites)


# --- the file index: what was observed, not what is on disk now


def _copy_file_index(old: Salvage, store: Store, on_disk: set[str], now: datetime, report: RebuildReport) -> None:
    """Files no longer on disk keep their index rows (deleted now, if the old store had not seen it yet), files on
    disk keep the earlier creation time the old store saw, and every recorded modification is kept."""
    fresh = store.index_rows()
    with store.transaction():
        for row in old.rows("files", _FILE_COLUMNS):
            values = row[1:]
            if not _typed(values, _FILE_TYPES):
                report.bad["files"] += 1
                continue
            path, created, deleted, mtime_ns, size, sha, front_matter = values
            current = fresh.get(path)
            if current is None:
                if path in on_disk:  # on disk yet not indexed (outside every glob and not Markdown): nothing to keep
                    continue
                store.put_file(IndexRow(path, from_us(created), from_us(deleted) if deleted is not None else now,
                                        mtime_ns, size, sha, bool(front_matter)))
                report.kept["files"] += 1
            elif from_us(created) < current.created and not current.front_matter:
                store.put_file(IndexRow(path, from_us(created), current.deleted, current.mtime_ns, current.size,
                                        current.sha, current.front_matter))
                report.kept["files"] += 1
        known = set(store.index_rows())
        for chunk in _chunks(row[1:] for row in old.rows("file_changes", copy_columns("file_changes"))):
            good = [values for values in chunk if _typed(values, (str, int)) and values[0] in known]
            report.bad["file_changes"] += len(chunk) - len(good)
            report.kept["file_changes"] += store.copy_rows("file_changes", good)


# --- whole tables nothing re-derives


def _copy_table(old: Salvage, store: Store, table: str, types: Sequence[Any], report: RebuildReport) -> None:
    """Every readable row of ``checks`` or ``history`` (checks in their order of arrival: seq is given anew)."""
    columns = list(copy_columns(table))
    have = old.columns(table)
    # A store from before migration 002 has no check detail: its checks keep an empty one.
    select = [c if c in have or c != "detail" else "''" for c in columns]
    with store.transaction():
        for chunk in _chunks(row[1:] for row in old.rows(table, select)):
            good = [values for values in chunk if _typed(values, types)]
            report.bad[table] += len(chunk) - len(good)
            report.kept[table] += store.copy_rows(table, good)


def _chunks(rows: Iterable[tuple[Any, ...]]) -> Iterator[list[tuple[Any, ...]]]:
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _typed(values: Sequence[Any], types: Sequence[Any]) -> bool:
    """True iff each value has its column's type (a bool is no int here: SQLite never returns one)."""
    if len(values) != len(types):
        return False
    for value, kind in zip(values, types, strict=True):
        allowed = kind if isinstance(kind, tuple) else (kind,)
        if value is None:
            if None not in allowed:
                return False
        elif not isinstance(value, tuple(k for k in allowed if k is not None)):
            return False
    return True


#: For the CLI's summary: what a table's rows are, in the order they are listed.
NAMES: dict[str, str] = {
    "checks": "link checks", "history": "history rows", "files": "file-index rows",
    "file_changes": "recorded modifications", "events": "events of log files no longer on disk",
    "labels": "labels of log files no longer on disk", "rejects": "line rejects of log files no longer on disk",
}


def describe(counts: Counter[str]) -> str:
    """``65 link checks, 36 history rows, ...`` in the order of :data:`NAMES` (zeros left out)."""
    return ", ".join(f"{counts[t]} {name}" for t, name in NAMES.items() if counts[t]) or "nothing"


def describe_lost(lost: dict[str, list[tuple[int, int | None]]]) -> list[str]:
    """One phrase per table with unreadable runs: ``events rowids 101-356``, ``checks every row from rowid 1``."""
    out = []
    for table, runs in sorted(lost.items()):
        spans = ", ".join(f"{a}-{b}" if b is not None and b != a else f"{a}" if b is not None
                          else f"{a} to the end" for a, b in runs)
        out.append(f"{table} rowids {spans}")
    return out
