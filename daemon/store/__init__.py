"""The store: SQLite in WAL mode, the only package that writes SQL or touches a connection.

Every write goes through :meth:`Store.transaction`, so parsed rows, rejects and the file cursor that produced them
are committed together: a crash leaves either all of a batch or none of it, and the unique keys (path, generation,
line) make a replay harmless.

* :mod:`~daemon.store.connection`: opening, migrating, and every transaction (write, ingest group, read);
* :mod:`~daemon.store.gate`: the writer's COMMITs kept out of the evaluations' snapshots;
* :mod:`~daemon.store.migrations`: the schema, as named migrations in order (a new table is a new one at the end);
* :mod:`~daemon.store.rows`: records to rows and back; :mod:`~daemon.store.writes`, :mod:`~daemon.store.queries`
  and :mod:`~daemon.store.feed`: the typed writes, reads, and what the live model reads to keep up;
  :mod:`~daemon.store.reviews`: the review queue's events;
  :mod:`~daemon.store.pagereads`: what the reviewer's pages read for their rows (texts, labels with notes);
* :mod:`~daemon.store.salvage`: checking a file and reading a damaged one; :mod:`~daemon.store.errors`: what a
  failure means (full, damaged).
"""

from __future__ import annotations

from collectors.rfc3339 import to_us
from daemon.store.errors import store_damaged, store_full
from daemon.store.feed import Feed
from daemon.store.gate import Gate
from daemon.store.migrations import MIGRATIONS, Migration
from daemon.store.pagereads import PageReads
from daemon.store.reviews import ReviewRows
from daemon.store.rows import (
    CitationRow,
    EventRow,
    Fingerprint,
    IndexRow,
    StoredStat,
    copy_columns,
    event_rows,
    row_builder,
)
from daemon.store.salvage import Salvage, quick_check, table_names
from daemon.store.writes import Writes


class Store(Writes, Feed, ReviewRows, PageReads):
    """One SQLite database; construct with :meth:`open`. Not thread-safe: one writer.

    ``gate``, shared by the writer and a reader that runs often (the daemon's evaluations): see :class:`Gate`.
    """


__all__ = [
    "MIGRATIONS", "CitationRow", "EventRow", "Fingerprint", "Gate", "IndexRow", "Migration", "Salvage", "Store",
    "StoredStat", "copy_columns", "event_rows", "quick_check", "row_builder", "store_damaged", "store_full",
    "table_names", "to_us",
]
