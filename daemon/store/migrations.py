"""The store's schema as named migrations, applied in order and each recorded in the ``migrations`` table.

A new table or column is a new migration at the end of :data:`MIGRATIONS` (never an edit of one already
released): its name says what it does, and a comment in it why.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Migration = Callable[[sqlite3.Connection], None]


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the caller's transaction (executescript would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _m001_initial(conn: sqlite3.Connection) -> None:
    _run_script(
        conn,
        """
        CREATE TABLE events (
            rowid INTEGER PRIMARY KEY,
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL,
            id TEXT NOT NULL, ts_us INTEGER NOT NULL, agent TEXT NOT NULL, kind TEXT NOT NULL,
            thread TEXT, text TEXT NOT NULL, prompt TEXT, reason TEXT,
            alternatives TEXT NOT NULL, subject TEXT NOT NULL, corrects TEXT,
            UNIQUE (path, generation, line)
        );
        CREATE INDEX events_ts ON events (ts_us);
        CREATE INDEX events_id ON events (id);
        CREATE TABLE citations (
            event INTEGER NOT NULL REFERENCES events(rowid) ON DELETE CASCADE,
            seq INTEGER NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL,
            PRIMARY KEY (event, seq)
        );
        CREATE INDEX citations_target ON citations (type, target);
        CREATE TABLE labels (
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL,
            ts_us INTEGER NOT NULL, decision TEXT NOT NULL, value TEXT NOT NULL, reviewer TEXT NOT NULL,
            PRIMARY KEY (path, generation, line)
        );
        CREATE TABLE rejects (
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL,
            source TEXT NOT NULL, reason TEXT NOT NULL, snippet TEXT NOT NULL, seen_us INTEGER NOT NULL,
            PRIMARY KEY (path, generation, line)
        );
        CREATE TABLE cursors (
            path TEXT PRIMARY KEY, dev INTEGER NOT NULL, ino INTEGER NOT NULL,
            generation INTEGER NOT NULL, offset INTEGER NOT NULL, line INTEGER NOT NULL,
            head_len INTEGER NOT NULL, head_sha TEXT NOT NULL, marker_sha TEXT NOT NULL
        );
        CREATE TABLE files (
            path TEXT PRIMARY KEY, created_us INTEGER NOT NULL, deleted_us INTEGER,
            mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, sha TEXT, front_matter INTEGER NOT NULL
        );
        CREATE TABLE file_changes (
            path TEXT NOT NULL, at_us INTEGER NOT NULL, PRIMARY KEY (path, at_us)
        );
        CREATE TABLE checks (
            seq INTEGER PRIMARY KEY, target TEXT NOT NULL, type TEXT NOT NULL,
            checked_us INTEGER NOT NULL, ok INTEGER, status INTEGER
        );
        CREATE INDEX checks_target ON checks (type, target, checked_us);
        CREATE TABLE evals (
            path TEXT PRIMARY KEY, model TEXT NOT NULL, report TEXT NOT NULL, sha TEXT NOT NULL
        );
        """
    )


def _m002_check_detail(conn: sqlite3.Connection) -> None:
    # Why a check failed ("forbidden address", "404", "ghost path") is what a reviewer reads first.
    conn.execute("ALTER TABLE checks ADD COLUMN detail TEXT NOT NULL DEFAULT ''")


def _m003_history(conn: sqlite3.Connection) -> None:
    # Daily per-component counts: weights-free, so any version can re-render past scores.
    conn.execute(
        "CREATE TABLE history (day TEXT NOT NULL, agent TEXT NOT NULL, window TEXT NOT NULL,"
        " component TEXT NOT NULL, passed INTEGER NOT NULL, counted INTEGER NOT NULL, pending INTEGER NOT NULL,"
        " decisions INTEGER NOT NULL, PRIMARY KEY (day, agent, window, component))"
    )


def _m004_citations_by_line(conn: sqlite3.Connection) -> None:
    # Citations keyed like their event, (path, generation, line): a batch of events and of citations
    # can then be inserted with two executemany calls, with no per-event rowid round trip.
    _run_script(
        conn,
        """
        CREATE TABLE citations_by_line (
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL, seq INTEGER NOT NULL,
            type TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (path, generation, line, seq)
        ) WITHOUT ROWID;
        INSERT INTO citations_by_line
            SELECT e.path, e.generation, e.line, c.seq, c.type, c.target
            FROM citations c JOIN events e ON e.rowid = c.event;
        DROP TABLE citations;
        ALTER TABLE citations_by_line RENAME TO citations;
        CREATE INDEX citations_target ON citations (type, target)
        """,
    )


def _m005_change_feed(conn: sqlite3.Connection) -> None:
    # What the daemon's in-memory model cannot see by watching rowids grow: removed Markdown decisions
    # (their rowids may be handed out again) and file-index changes (a modification with its time, so the
    # model need not re-read every modification of a log that is appended to all day). Triggers write it in the same
    # transaction as the change itself, so whatever is committed is in the feed, however the write ended.
    conn.execute(
        "CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT NOT NULL, path TEXT NOT NULL,"
        " rid INTEGER)"
    )
    # One statement each: a trigger body holds semicolons, which _run_script splits on.
    for name, when, what, path, rid in (
        ("events_removed", "AFTER DELETE ON events", "events", "old.path", "old.rowid"),
        ("files_added", "AFTER INSERT ON files", "files", "new.path", "NULL"),
        ("files_updated", "AFTER UPDATE ON files", "files", "new.path", "NULL"),
        ("files_changed", "AFTER INSERT ON file_changes", "modified", "new.path", "new.at_us"),
    ):
        conn.execute(
            f"CREATE TRIGGER {name} {when} BEGIN"
            f" INSERT INTO changes (what, path, rid) VALUES ('{what}', {path}, {rid}); END"
        )


def _m006_drop_unused_indexes(conn: sqlite3.Connection) -> None:
    # No query reads events by ts_us or by id (the model loads by rowid, documents go by path), yet every insert
    # kept both indexes: a large share of the store's insert time (docs/performance.md), and disk.
    conn.execute("DROP INDEX IF EXISTS events_ts")
    conn.execute("DROP INDEX IF EXISTS events_id")


def _m007_feed_file_changes_only(conn: sqlite3.Connection) -> None:
    # put_file was INSERT OR REPLACE, a delete and an insert: every index update of a log, one per ingest pass,
    # fed a 'files' row besides its 'modified' row, and each sync read the index row back to learn nothing new.
    # put_file now updates in place, and an update feeds a row only when what the model keeps (created, deleted)
    # changed; a modification alone arrives as its 'modified' row.
    conn.execute("DROP TRIGGER IF EXISTS files_updated")
    conn.execute(
        "CREATE TRIGGER files_updated AFTER UPDATE ON files"
        " WHEN old.created_us IS NOT new.created_us OR old.deleted_us IS NOT new.deleted_us BEGIN"
        " INSERT INTO changes (what, path, rid) VALUES ('files', new.path, NULL); END"
    )


def _m008_store_id(conn: sqlite3.Connection) -> None:
    # The daemon's model cache (daemon/modelcache.py) holds marks into this store's rowids and change feed: they
    # mean nothing in another store, even one with the same row counts. A random id per store tells them apart.
    conn.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))))")


def _m009_symlinks(conn: sqlite3.Connection) -> None:
    # Spec v2.3: a path through a symlink names its target. The index holds each file once, under its canonical
    # path; a source read under another name keeps a row of its own marked with the file it names (files.canonical);
    # the symlinks inside the root are stored, so `score --db` and the daemon resolve paths without the state dir.
    conn.execute("ALTER TABLE files ADD COLUMN canonical TEXT")
    conn.execute("CREATE TABLE links (path TEXT PRIMARY KEY, target TEXT)")
    # The model must hear of a row turning from an index entry into a name, or back (see migration 007).
    conn.execute("DROP TRIGGER IF EXISTS files_updated")
    conn.execute(
        "CREATE TRIGGER files_updated AFTER UPDATE ON files"
        " WHEN old.created_us IS NOT new.created_us OR old.deleted_us IS NOT new.deleted_us"
        " OR old.canonical IS NOT new.canonical BEGIN"
        " INSERT INTO changes (what, path, rid) VALUES ('files', new.path, NULL); END"
    )
    for name, when, path in (
        ("links_added", "AFTER INSERT ON links", "new.path"),
        ("links_updated", "AFTER UPDATE ON links WHEN old.target IS NOT new.target", "new.path"),
        ("links_removed", "AFTER DELETE ON links", "old.path"),
    ):
        conn.execute(
            f"CREATE TRIGGER {name} {when} BEGIN INSERT INTO changes (what, path, rid) VALUES ('links', {path}, NULL);"
            " END"
        )


def _m010_logs_keep_no_modifications(conn: sqlite3.Connection) -> None:
    # Spec v2.3 (1.4): an append to a JSON Lines source is not a modification; a log keeps only created and deleted.
    # Every log tailed has a cursor (the globs are config, unknown here; the cursors are what was read as a log), and
    # up to now each of its ingest passes added a row here.
    conn.execute("DELETE FROM file_changes WHERE path IN (SELECT path FROM cursors)")


def _m011_label_notes(conn: sqlite3.Connection) -> None:
    # A reviewer's note beside a 👍/👎 (the reviewer's pages, issue 23): shown on the decision's row, read by no rule.
    conn.execute("ALTER TABLE labels ADD COLUMN note TEXT")


def _m012_review_events(conn: sqlite3.Connection) -> None:
    # The review queue's events (reviews/*.jsonl, collectors/reviews.py), keyed like every log's rows so a replay adds
    # nothing; the daemon folds them into its queue in rowid order of arrival (rowids only grow: rows are never
    # removed). ``body`` is the line's JSON object, which the fold reads whole.
    conn.execute(
        "CREATE TABLE review_events (rowid INTEGER PRIMARY KEY, path TEXT NOT NULL, generation INTEGER NOT NULL,"
        " line INTEGER NOT NULL, id TEXT NOT NULL, ts_us INTEGER NOT NULL, review TEXT NOT NULL, event TEXT NOT NULL,"
        " body TEXT NOT NULL, UNIQUE (path, generation, line))"
    )


def _m013_ids_let_go(conn: sqlite3.Connection) -> None:
    # The daemon's model lets go of records behind every window; a record arriving later with one of their ids must
    # still lose to them (spec 1.1, forever). The ids' 64-bit hashes (scorers/live/records.py id_hash) live here, not
    # in RAM: upto_us is the horizon they were let go up to (a model whose own horizon is earlier ignores the row).
    conn.execute("CREATE TABLE let_go (hash INTEGER PRIMARY KEY, upto_us INTEGER NOT NULL)")


def _m014_file_fingerprints(conn: sqlite3.Connection) -> None:
    # A start read every Markdown file whole to hash it: most of a restart's time on a big state. The stat the hash was
    # taken after (change time, device, inode) and when (seen_ns) tell an unchanged file without reading it
    # (daemon/ingest/fingerprint.py); NULL, as in every row before this: read the file, then record them.
    for column in ("ctime_ns", "dev", "ino", "seen_ns"):
        conn.execute(f"ALTER TABLE files ADD COLUMN {column} INTEGER")


def _m015_citations_keep_only_their_key(conn: sqlite3.Connection) -> None:
    # The (type, target) index served one query, the distinct targets a one-shot `honestyd verify` reads once per run,
    # yet every citation of every ingest inserted an entry in it at a random place: a large share of the ingest's
    # writes (docs/performance.md, issue 25). Without it that query reads the table once and sorts its targets.
    conn.execute("DROP INDEX IF EXISTS citations_target")


#: Named migrations, applied in order and recorded in the ``migrations`` table.
MIGRATIONS: Sequence[tuple[str, Migration]] = (
    ("001_initial", _m001_initial),
    ("002_check_detail", _m002_check_detail),
    ("003_history", _m003_history),
    ("004_citations_by_line", _m004_citations_by_line),
    ("005_change_feed", _m005_change_feed),
    ("006_drop_unused_indexes", _m006_drop_unused_indexes),
    ("007_feed_file_changes_only", _m007_feed_file_changes_only),
    ("008_store_id", _m008_store_id),
    ("009_symlinks", _m009_symlinks),
    ("010_logs_keep_no_modifications", _m010_logs_keep_no_modifications),
    ("011_label_notes", _m011_label_notes),
    ("012_review_events", _m012_review_events),
    ("013_ids_let_go", _m013_ids_let_go),
    ("014_file_fingerprints", _m014_file_fingerprints),
    ("015_citations_keep_only_their_key", _m015_citations_keep_only_their_key),
)
