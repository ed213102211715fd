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

from collectors.statedir import FileInfo
from daemon.store import Fingerprint, IndexRow

#: How much older than the recording stat a change time must be to count: more than a timestamp tick of any local
#: filesystem (FAT's mtime: 2 s) and than the lag of the kernel's coarse clock, which file times are taken from.
RACY_NS = 2_000_000_000


def fingerprint_of(info: FileInfo, seen_ns: int) -> Fingerprint:
    """What the index row records of ``info``, stat'ed after the wall clock said ``seen_ns``."""
    return Fingerprint(info.ctime_ns, info.dev, info.ino, seen_ns)


def unchanged(row: IndexRow | None, info: FileInfo, canonical: str | None) -> bool:
    """True iff ``row`` says the file that ``info`` stat'ed (read under the name ``canonical`` names, None for its own)
    holds the bytes hashed in it, so that it need not be read: same size, mtime, change time, device and inode as
    the stat recorded, that stat not racy, and the row a live one with a hash."""
    if row is None or row.deleted is not None or row.sha is None or row.canonical != canonical:
        return False
    fp = row.fingerprint
    return fp is not None and (row.size, row.mtime_ns, fp.ctime_ns, fp.dev, fp.ino) == (
        info.size, info.mtime_ns, info.ctime_ns, info.dev, info.ino) and trusted(fp)


def trusted(fp: Fingerprint) -> bool:
    """Whether the change time ``fp`` recorded is clearly older than the stat that recorded it (else: racy)."""
    return fp.ctime_ns < fp.seen_ns - RACY_NS
