"""The ingest's batches of complete lines (collectors/tail.py ``line_batches``) are :func:`complete_lines`, cut into
lists: the same lines in order, oversized ones refused with the same snippet, each batch's end offset the end of its
last line (the cursor stored with it). Generated files of short, long and oversized lines, read in small chunks from
any offset."""

from __future__ import annotations

import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors import tail
from collectors.tail import complete_lines, line_batches

PIECES = st.sampled_from([b"a", b"{}", b"xyz" * 4, b"\r", b"\n", b"\r\n", b"\n\n", b"q" * 30, b"\xff", b" "])
CONTENT = st.lists(PIECES, max_size=40).map(b"".join)


@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=CONTENT, chunk=st.integers(1, 64), limit=st.integers(1, 40), size=st.integers(1, 7),
       start=st.integers(0, 50))
def test_line_batches_are_complete_lines_cut_into_lists(monkeypatch: pytest.MonkeyPatch, data: bytes, chunk: int,
                                                        limit: int, size: int, start: int) -> None:
    monkeypatch.setattr(tail, "CHUNK", chunk)
    offset = min(start, len(data))
    reference = list(complete_lines(io.BytesIO(data), offset, limit))
    batches = list(line_batches(io.BytesIO(data), offset, size, limit))
    assert [len(lines) for lines, _ in batches[:-1]] == [size] * (len(batches) - 1)
    assert all(0 < len(lines) <= size for lines, _ in batches)
    flat = [line for lines, _ in batches for line in lines]
    assert [d for d, _ in flat] == [r.data for r in reference]
    assert [s for d, s in flat if d is None] == [r.snippet for r in reference if r.data is None]
    assert all(s == d for d, s in flat if d is not None)
    ends = [end for _, end in batches]
    assert ends == [reference[min(i * size + size, len(reference)) - 1].end for i in range(len(batches))]


def test_a_huge_line_is_skipped_in_bounded_memory() -> None:
    """An oversized line spanning many chunks is refused without being held: as complete_lines does."""
    limit = 10
    data = b"first\n" + b"y" * (tail.CHUNK * 3) + b"\nlast\n"
    [(lines, end)] = list(line_batches(io.BytesIO(data), 0, 100, limit))
    assert [d for d, _ in lines] == [b"first", None, b"last"] and end == len(data)
    assert len(lines[1][1]) == tail.SNIPPET_BYTES
