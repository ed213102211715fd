"""Lines of a heartbeat log, a labels file or a review file as records (pure): what one batch of a tailed log holds."""

from __future__ import annotations

from typing import NamedTuple

from collectors.jsonl import parse_event, parse_label, read_event, strip_ending
from collectors.records import Event, Label, Reject
from collectors.reviews import ReviewEvent, parse_review_event
from collectors.rfc3339 import parse_ts_us
from daemon import gcpolicy
from daemon.store import CitationRow, EventRow, event_rows, row_builder


class Parsed(NamedTuple):
    """What a batch of lines holds: event rows for the store (see :func:`daemon.store.event_rows`), labels, rejects,
    review events."""

    rows: list[EventRow]
    citations: list[CitationRow]
    labels: list[Label]
    rejects: list[Reject]
    reviews: tuple[ReviewEvent, ...] = ()


def parse_line(data: bytes | None, snippet: bytes, path: str, line: int, generation: int, source: str,
               repo: str) -> Event | Label | ReviewEvent | Reject:
    """One line of a heartbeat log, a labels file or a review file as a record, or the reason it is refused."""
    if data is None:
        return _oversized(snippet, path, line)
    data = strip_ending(data)
    if source == "labels":
        return parse_label(data, path, line, generation)
    if source == "reviews":
        return parse_review_event(data, path, line, generation)
    return parse_event(data, path, line, repo, generation)


def _oversized(snippet: bytes, path: str, line: int) -> Reject:
    return Reject(path, line, "oversized", snippet.decode("utf-8", "replace")[:200])


def parse_batch(lines: list[tuple[bytes | None, bytes]], path: str, first: int, generation: int, source: str,
                repo: str) -> Parsed:
    """Parse consecutive lines of one source, the first being line ``first`` (pure)."""
    if source != "labels" and source != "reviews":
        return _parse_heartbeats(lines, path, first, generation, repo)
    events: list[Event] = []
    labels: list[Label] = []
    rejects: list[Reject] = []
    reviews: list[ReviewEvent] = []
    for n, (data, snippet) in enumerate(lines, first):
        parsed = parse_line(data, snippet, path, n, generation, source, repo)
        if isinstance(parsed, Event):
            events.append(parsed)
        elif isinstance(parsed, Label):
            labels.append(parsed)
        elif isinstance(parsed, ReviewEvent):
            reviews.append(parsed)
        else:
            rejects.append(parsed)
    rows, citations = event_rows(events)
    return Parsed(rows, citations, labels, rejects, tuple(reviews))


def _parse_heartbeats(lines: list[tuple[bytes | None, bytes]], path: str, first: int, generation: int,
                      repo: str) -> Parsed:
    """:func:`parse_batch` of heartbeat lines: :func:`parse_line`'s reading of each, with its dispatch on the source
    taken once per batch, and each record's fields made into the store's rows at once, its time read straight to
    microseconds (the ingest's hot loop).

    The cyclic collector is paused meanwhile: the batch's rows are thousands of new objects, which would start many
    collections each walking them, and the loop makes no cycles (so nothing waits for one to be freed).
    """
    rows, cites, build = row_builder()
    rejects: list[Reject] = []
    with gcpolicy.paused(freeze=False):
        for n, (data, snippet) in enumerate(lines, first):
            if data is None:
                rejects.append(_oversized(snippet, path, n))
                continue
            if data[-1:] == b"\n":  # strip_ending(data), spelt out
                data = data[:-1]
            if data[-1:] == b"\r":
                data = data[:-1]
            refused = read_event(data, path, n, repo, generation, parse_ts_us, build)
            if refused is not None:
                rejects.append(refused)
    return Parsed(rows, cites, [], rejects)
