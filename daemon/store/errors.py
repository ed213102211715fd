"""What a failed store operation means: the store full, or the file damaged (as opposed to busy or unreachable).

The daemon keeps pending work on a full store and retries it, and stops on a damaged one (exit status 3); both are
told apart here, from SQLite's result codes, so that no other module reads them.
"""

from __future__ import annotations

import sqlite3

#: SQLite's primary result codes for a damaged file (sqlite3 raises them as DatabaseError, not OperationalError).
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def store_full(exc: BaseException) -> sqlite3.Error | None:
    """The SQLITE_FULL error behind ``exc`` (database or disk full, or ``max_page_count`` reached), else None.

    The chain is walked because SQLite rolls a transaction back itself on SQLITE_FULL, so the ROLLBACK in
    :meth:`~daemon.store.connection.Connection.transaction` then fails with "no transaction is active", raised with the
    real error as its context.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, sqlite3.Error) and getattr(seen, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def store_damaged(exc: BaseException) -> bool:
    """True iff ``exc`` says the database file is damaged ("database disk image is malformed", "file is not a
    database"), as opposed to busy, full or unreachable."""
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DAMAGE_CODES
    return "malformed" in str(exc) or "not a database" in str(exc)
