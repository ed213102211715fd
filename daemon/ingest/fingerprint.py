"""Whether a file read whole (Markdown, reports) is unchanged since its hash was taken, told from a stat alone (pure).

A scan compares what the walk's stat says now with what the index row recorded (migration 014): size and mtime, and
the change time, device and inode of the stat the stored hash was taken after. Any write to a file, and any
``utime`` that puts its mtime back, sets its change time to the current time, which nothing but a clock set back can
undo: an edit that keeps size and mtime ("same size, same mtime, different bytes") still changes the fingerprint. A
new file in the old one's place has another inode (or the old inode with a new change time).

One case remains, as git's "racily clean" index entries: an edit in the same tick of the filesystem's clock as the
stat that was recorded may leave the change time as it was. So a fingerprint counts only when the change time it
recorded is clearly older (by :data:`RACY_NS`) than the moment before that stat (``seen_ns``); a file changed just
before it was recorded is read and hashed at the next pass as well, which then records a fingerprint that counts.
"""

from __future__ import annotations

from collectors.statedir import FileInfo, Files
from daemon.store import Fingerprint, IndexRow, StoredStat

#: How much older than the recording stat a change time must be to count: more than a timestamp tick of any local
#: filesystem (FAT's mtime: 2 s) and than the lag of the kernel's coarse clock, which file times are taken from.
RACY_NS = 2_000_000_000


def fingerprint_of(info: FileInfo, seen_ns: int) -> Fingerprint:
    """What the index row records of ``info``, stat'ed after the wall clock said ``seen_ns``."""
    return Fingerprint(info.ctime_ns, info.dev, info.ino, seen_ns)


#: What a file is told by: size, mtime, change time, device, inode, and the file a name through a symlink names.
StatKey = tuple[int, int, int, int, int, str | None]


def stat_key(info: FileInfo, canonical: str | None) -> StatKey:
    """The key of the file ``info`` stat'ed, read under the name ``canonical`` names (None: its own)."""
    return info.size, info.mtime_ns, info.ctime_ns, info.dev, info.ino, canonical


def stat_key_at(files: Files, i: int, canonical: str | None) -> StatKey:
    """:func:`stat_key` of the walk's file at ``i``, from its columns (no FileInfo made)."""
    mtime_ns, size, dev, ino, ctime_ns = files.stats(i)
    return size, mtime_ns, ctime_ns, dev, ino, canonical


def stored_key(stored: StoredStat) -> StatKey | None:
    """The key a row recorded (as :meth:`daemon.store.Store.stats_in_order` reads it), if it tells its file without
    a read: a live row with a hash, and a fingerprint that counts (not racy); else None."""
    _, live_hashed, canonical, size, mtime_ns, ctime_ns, dev, ino, seen_ns = stored
    if not live_hashed or ctime_ns is None or dev is None or ino is None or seen_ns is None or \
            not trusted(Fingerprint(ctime_ns, dev, ino, seen_ns)):
        return None
    return size, mtime_ns, ctime_ns, dev, ino, canonical


def unchanged(row: IndexRow | None, info: FileInfo, canonical: str | None) -> bool:
    """True iff ``row`` says the file that ``info`` stat'ed (read under the name ``canonical`` names, None for its own)
    holds the bytes hashed in it, so that it need not be read: same size, mtime, change time, device and inode as
    the stat recorded, that stat not racy, and the row a live one with a hash."""
    if row is None or row.fingerprint is None:
        return False
    stored = (row.path, row.deleted is None and row.sha is not None, row.canonical, row.size, row.mtime_ns,
              *row.fingerprint)
    return stored_key(stored) == stat_key(info, canonical)


def trusted(fp: Fingerprint) -> bool:
    """Whether the change time ``fp`` recorded is clearly older than the stat that recorded it (else: racy)."""
    return fp.ctime_ns < fp.seen_ns - RACY_NS
