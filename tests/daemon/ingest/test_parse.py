"""A batch of heartbeat lines parsed the ingest's way (daemon/ingest/parse.py: one loop for the batch, rows built
from the records unpacked) gives, line by line, what the general per-line reading gives: ``parse_line`` of each line
and the rows read from each record by name, as the store's rows were built before issue 25. Generated lines, valid
and not, many of them citing."""

from __future__ import annotations

import gc
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.records import Event, Reject
from collectors.rfc3339 import to_us
from daemon.ingest.parse import Parsed, parse_batch, parse_line
from daemon.store import CitationRow, EventRow

PATH = "heartbeats/ada.jsonl"
#: Pieces of prose that hold each citation form, its near misses and none.
WORDS = ["See", "run #123456", "Run #12", "issue #7", "PR #0", "pull request #42", "acme/app#9", "o.r/x-y#1", "#",
         "[source:docs/a.md]", "[x](https://h.example/a#f)", "[y](#top)", "https://github.com/a/b/actions/runs/1234567",
         "http://H.example/", "cos-state/x/../y.md", "é", "[", "]", "(", ")", "/", " ", "ok."]
TEXT = st.one_of(st.text(max_size=60), st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join))
STRINGS = st.one_of(st.none(), st.integers(), TEXT, st.lists(st.one_of(TEXT, st.integers()), max_size=3))
#: Times the ingest reads straight to microseconds (``Z`` ones summed from their fields) and the ones it refuses.
TS = st.sampled_from(["2026-05-31T03:40:00Z", "2026-05-31 03:40:00.1234567+02:00", "2026-05-31T03:40:00", "", "x",
                      "2026-05-31t03:40:00.5z", "2024-02-29T23:59:59.999999Z", "2026-02-29T00:00:00Z",
                      "2026-05-31T24:00:00Z", "1969-12-31T23:59:59.9Z", "0001-01-01T00:00:00+00:01"])
EVENT = st.fixed_dictionaries(
    {"ts": TS, "agent": st.sampled_from(["ada", "bo", ""]), "kind": st.sampled_from(["dm", "refusal", "ack"])},
    optional={"id": st.one_of(st.none(), st.sampled_from(["e1", "e2", ""])), "text": TEXT, "citations": STRINGS,
              "thread": STRINGS, "prompt": STRINGS, "reason": STRINGS, "alternatives": STRINGS, "subject": STRINGS,
              "corrects": STRINGS},
)


def _line(obj: dict[str, Any], ending: bytes) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode() + ending


LINE = st.one_of(
    st.builds(_line, EVENT, st.sampled_from([b"", b"\r"])),
    st.binary(max_size=40),
    st.just(None),  # longer than the limit: line_batches gives no data, only the snippet
)


def reference_rows(events: list[Event]) -> tuple[list[EventRow], list[CitationRow]]:
    """The store's rows for ``events``, each field read by name (daemon.store.event_rows as it was)."""
    rows: list[EventRow] = []
    cites: list[CitationRow] = []
    for e in events:
        line = e.line or 0
        rows.append((e.path, e.generation, line, e.id, to_us(e.ts), e.agent, e.kind, e.thread, e.text, e.prompt,
                     e.reason, json.dumps(e.alternatives) if e.alternatives else "[]",
                     json.dumps(e.subject) if e.subject else "[]", e.corrects))
        cites.extend((e.path, e.generation, line, i, c.type, c.target) for i, c in enumerate(e.citations))
    return rows, cites


def reference_batch(lines: list[tuple[bytes | None, bytes]], first: int, generation: int, repo: str) -> Parsed:
    """``parse_line`` of each line, in order: the general reading, dispatching on the source and the record."""
    events: list[Event] = []
    rejects: list[Reject] = []
    for n, (data, snippet) in enumerate(lines, first):
        record = parse_line(data, snippet, PATH, n, generation, "heartbeats", repo)
        assert isinstance(record, Event | Reject)
        (events if isinstance(record, Event) else rejects).append(record)
    rows, cites = reference_rows(events)
    return Parsed(rows, cites, [], rejects)


@settings(max_examples=1500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(raw=st.lists(LINE, max_size=12), first=st.integers(1, 10**6), generation=st.integers(0, 3),
       repo=st.sampled_from(["acme/app", "", "A/B"]))
def test_a_batch_of_heartbeat_lines_reads_as_each_line_alone(raw: list[bytes | None], first: int, generation: int,
                                                             repo: str) -> None:
    lines = [(data, b"oversized line" if data is None else data[:100]) for data in raw]
    parsed = parse_batch(lines, PATH, first, generation, "heartbeats", repo)
    assert parsed == reference_batch(lines, first, generation, repo)
    assert len(parsed.rows) + len(parsed.rejects) == len(lines)


def test_a_batch_of_heartbeat_lines_starts_no_garbage_collection() -> None:
    """Each line's rows are new objects kept to the batch's end: with the collector on, thousands of them would start
    collections that walk them all again. The batch pauses it (one young collection may follow), and leaves it as it
    was found."""
    line = _line({"ts": "2026-05-31T03:40:00Z", "agent": "ada", "kind": "dm", "text": "See run #123456 and acme/app#9",
                  "citations": ["https://h.example/a"]}, b"")
    lines = [(line, line[:100])] * 5000
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    assert gc.isenabled()
    gc.collect()  # every generation's count at zero: what earlier tests left must not make the one collection older
    gc.callbacks.append(count)
    try:
        parsed = parse_batch(lines, PATH, 1, 0, "heartbeats", "acme/app")
        during = list(collections)
        enabled_after = gc.isenabled()
        gc.disable()
        try:
            parse_batch(lines, PATH, 1, 0, "heartbeats", "acme/app")
            still_disabled = not gc.isenabled()  # a caller that had it off keeps it off
        finally:
            gc.enable()
    finally:
        gc.callbacks.remove(count)
    assert len(parsed.rows) == 5000 and len(parsed.citations) == 15000
    # At most the one young collection the result's first allocations start once the collector is back on.
    assert during in ([], [0]), f"{len(during)} collections during one batch"
    assert enabled_after and still_disabled
