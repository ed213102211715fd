"""Tailing JSON Lines files: recognising a file again and reading its complete lines.

A file is known by (device, inode) plus a fingerprint of its head and a marker of the bytes
just before the saved offset; if either no longer matches, the file was truncated or
replaced in place and is read again from 0 as a new *generation*.
"""

from __future__ import annotations

import hashlib
import operator
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import accumulate, islice, repeat
from typing import BinaryIO

from collectors.jsonl import MAX_LINE_BYTES
from collectors.safeopen import open_regular

HEAD_BYTES = 1024
MARKER_BYTES = 64
CHUNK = 1 << 20
SNIPPET_BYTES = 800


@dataclass(frozen=True)
class Cursor:
    """How far a JSON Lines file has been read, and how to recognise that file again."""

    path: str
    dev: int
    ino: int
    generation: int
    offset: int
    line: int
    head_len: int
    head_sha: str
    marker_sha: str


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


EMPTY_SHA = _sha(b"")


def new_cursor(path: str, dev: int, ino: int, generation: int = 0) -> Cursor:
    """A cursor at offset 0 of a file seen for the first time (or restarted)."""
    return Cursor(path, dev, ino, generation, 0, 0, 0, EMPTY_SHA, EMPTY_SHA)


def advance(cursor: Cursor, fd: int, offset: int, line: int) -> Cursor:
    """The cursor moved to ``offset`` (just past a newline), with head and marker re-taken."""
    head_len = min(HEAD_BYTES, offset)
    marker_len = min(MARKER_BYTES, offset)
    return replace(
        cursor,
        offset=offset,
        line=line,
        head_len=head_len,
        head_sha=_sha(os.pread(fd, head_len, 0)),
        marker_sha=_sha(os.pread(fd, marker_len, offset - marker_len)),
    )


def matches(fd: int, cursor: Cursor) -> bool:
    """True iff the open file still holds, unchanged, the bytes the cursor has read."""
    st = os.fstat(fd)
    if st.st_size < cursor.offset:
        return False
    if _sha(os.pread(fd, cursor.head_len, 0)) != cursor.head_sha:
        return False
    marker_len = min(MARKER_BYTES, cursor.offset)
    return _sha(os.pread(fd, marker_len, cursor.offset - marker_len)) == cursor.marker_sha


def count_lines(fd: int, offset: int = 0) -> int:
    """How many complete lines the open file holds from ``offset`` on (newlines, read in chunks)."""
    count = 0
    while chunk := os.pread(fd, CHUNK, offset):
        count += chunk.count(b"\n")
        offset += len(chunk)
    return count


def find_rotated(directory: str, cursor: Cursor) -> str | None:
    """The file in ``directory`` that is the cursor's file under another name (rename rotation)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None
    for entry in entries:
        try:
            if entry.inode() != cursor.ino or not entry.is_file(follow_symlinks=False):
                continue
            st = entry.stat(follow_symlinks=False)
            if st.st_dev != cursor.dev:
                continue
            fd = open_regular(entry.path, follow=False)  # a FIFO swapped in since the scandir is never waited on
            try:
                if matches(fd, cursor):
                    return entry.path
            finally:
                os.close(fd)
        except OSError:
            continue
    return None


#: Lines of a batch as :func:`line_batches` gives them: (data, snippet) each, ``data`` the line without its newline, or
#: None when it exceeds the size limit and ``snippet`` then its first bytes.
Lines = list[tuple[bytes | None, bytes]]


def line_batches(f: BinaryIO, offset: int, size: int, limit: int = MAX_LINE_BYTES) -> Iterator[tuple[Lines, int]]:
    """The newline-terminated lines from ``offset`` in lists of ``size`` (the last one shorter), each with the offset
    just after its last line: what the ingest stores a transaction at a time. An unterminated last line is not read.

    Split out a chunk at a time rather than a line at a time. Memory stays bounded: a line longer than ``limit`` is
    skipped up to its newline and given as ``(None, its first bytes)`` so the caller can reject it; a line within the
    limit has itself as its snippet (a snippet is read only of a line without data).
    """
    f.seek(offset)
    base = offset  # file offset of buf[0]
    buf = b""
    skipping: bytes | None = None  # snippet of an oversized line being skipped
    # The lines not yet given, as their data and snippets: bytes, not pairs, which the cyclic collector tracks (the
    # caller pauses it while a batch is made, not while these wait for the next one).
    datas: list[bytes | None] = []
    snippets: list[bytes] = []
    ends: list[int] = []  # the offset just after each
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            break
        if skipping is not None:
            nl = chunk.find(b"\n")
            if nl < 0:
                base += len(chunk)
                continue
            datas.append(None)
            snippets.append(skipping)
            ends.append(base + nl + 1)
            skipping = None
            base += nl + 1
            chunk = chunk[nl + 1:]
        buf += chunk
        pieces = buf.split(b"\n")
        buf = pieces.pop()  # after the last newline: not a complete line yet
        if pieces:
            if max(map(len, pieces)) <= limit + 1:  # the limit is on the line without "\r\n"
                datas += pieces
                snippets += pieces
            else:
                datas += [p if len(p) <= limit + 1 else None for p in pieces]
                snippets += [p if len(p) <= limit + 1 else p[:SNIPPET_BYTES] for p in pieces]
            # Each line's end: from base, the running sum of the lengths, one more for each newline (all in C).
            ends += islice(accumulate(map(operator.add, map(len, pieces), repeat(1)), initial=base), 1, None)
            base = ends[-1]
        if len(buf) > limit + 1:
            skipping = buf[:SNIPPET_BYTES]
            base += len(buf)
            buf = b""
        while len(datas) >= size:
            yield list(zip(datas[:size], snippets[:size], strict=True)), ends[size - 1]
            del datas[:size], snippets[:size], ends[:size]
    if datas:
        yield list(zip(datas, snippets, strict=True)), ends[-1]
