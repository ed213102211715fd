"""The ingest's batches of complete lines (collectors/tail.py ``line_batches``) are the lines a reading a line at a time
finds (the reference below: the ingest's ``complete_lines`` before issue 25), cut into lists: the same lines in order,
oversized ones refused with the same snippet, each batch's end offset the end of its last line (the cursor stored with
it). Generated files of short, long and oversized lines, read in small chunks from any offset."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import tail
from collectors.tail import line_batches

PIECES = st.sampled_from([b"a", b"{}", b"xyz" * 4, b"\r", b"\n", b"\r\n", b"\n\n", b"q" * 30, b"\xff", b" "])
CONTENT = st.lists(PIECES, max_size=40).map(b"".join)


def reference_lines(f: BinaryIO, offset: int, limit: int) -> Iterator[tuple[int, bytes | None, bytes]]:
    """(end, data, snippet) of each complete line from ``offset``, a line at a time: ``complete_lines`` as the ingest
    read logs before issue 25's batches (its find loop; its snippets cut to tail.SNIPPET_BYTES)."""
    f.seek(offset)
    base = offset  # file offset of buf[0]
    buf = b""
    skipping: bytes | None = None  # snippet of an oversized line being skipped
    while True:
        chunk = f.read(tail.CHUNK)
        if not chunk:
            return
        if skipping is not None:
            nl = chunk.find(b"\n")
            if nl < 0:
                base += len(chunk)
                continue
            yield (base + nl + 1, None, skipping)
            skipping = None
            base += nl + 1
            chunk = chunk[nl + 1 :]
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            line = buf[start:nl]
            # The limit is on the line without its ending; allow for a "\r" before "\n".
            data = line if len(line) <= limit + 1 else None
            yield (base + nl + 1, data, line[:tail.SNIPPET_BYTES])
            start = nl + 1
        buf = buf[start:]
        base += start
        if len(buf) > limit + 1:
            skipping = buf[:tail.SNIPPET_BYTES]
            base += len(buf)
            buf = b""




@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=CONTENT, chunk=st.integers(1, 64), limit=st.integers(1, 40), size=st.integers(1, 7),
       start=st.integers(0, 50))
def test_line_batches_are_the_lines_of_a_line_at_a_time_reading_cut_into_lists(
        monkeypatch: pytest.MonkeyPatch, data: bytes, chunk: int, limit: int, size: int, start: int) -> None:
    monkeypatch.setattr(tail, "CHUNK", chunk)
    offset = min(start, len(data))
    reference = list(reference_lines(io.BytesIO(data), offset, limit))
    batches = list(line_batches(io.BytesIO(data), offset, size, limit))
    assert [len(lines) for lines, _ in batches[:-1]] == [size] * (len(batches) - 1)
    assert all(0 < len(lines) <= size for lines, _ in batches)
    flat = [line for lines, _ in batches for line in lines]
    assert [d for d, _ in flat] == [d for _, d, _ in reference]
    assert [s for d, s in flat if d is None] == [s for _, d, s in reference if d is None]
    assert all(s == d for d, s in flat if d is not None)
    ends = [end for _, end in batches]
    assert ends == [reference[min(i * size + size, len(reference)) - 1][0] for i in range(len(batches))]


def test_a_huge_line_is_skipped_in_bounded_memory() -> None:
    """An oversized line spanning many chunks is refused, its first bytes kept as its snippet."""
    limit = 10
    data = b"first\n" + b"y" * (tail.CHUNK * 3) + b"\nlast\n"
    [(lines, end)] = list(line_batches(io.BytesIO(data), 0, 100, limit))
    assert [d for d, _ in lines] == [b"first", None, b"last"] and end == len(data)
    assert len(lines[1][1]) == tail.SNIPPET_BYTES
