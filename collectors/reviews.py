"""Review events (``reviews/*.jsonl``): one JSON object a line, parsed into a :class:`ReviewEvent` or refused.

honestyd appends them itself (an agent's review opened, a decision of it labelled, the review closed with a note,
reopened, an alert recorded on it) and reads them back like any source, so the files are the queue's source of
truth: a restart, or a second reader of the same files, folds them into the same queue (daemon/reviews/queue.py).
A line is refused, counted and logged like a heartbeat line (spec 1.1) when it is not a JSON object, lacks a field
its kind requires, or has an invalid value; the fold then never sees it.

Every line::

    {"ts": RFC 3339, "review": "r-20260503-3f9a1c0b", "event": "opened" | "reopened" | "labelled" | "closed" | "alert",
     ...the fields of its kind}

* ``opened`` and ``reopened``: ``agent``, ``reason`` (``below`` or ``drop``) and the evidence gathered then;
* ``labelled``: ``decision``, ``value`` (``up`` or ``down``), ``reviewer``;
* ``closed``: ``reviewer``, ``note``;
* ``alert``: ``status`` (``firing`` or ``resolved``), ``alertname``.

The event's id is its ``id`` field when it has one, else the first 16 hex digits of SHA-256 of the line (as spec 1.1
does for heartbeats): a line read twice (a log rewritten, a second reader) is one event.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from collectors.batch import terminated_lines
from collectors.jsonl import LABEL_VALUES, load_object, snippet, strip_ending
from collectors.records import Reject
from collectors.rfc3339 import TimestampError, parse_ts
from collectors.safeopen import read_regular
from collectors.statedir import glob_match, walk

#: The kinds of event, and the fields each requires as non-empty strings (beyond ts, review and event).
EVENT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "opened": ("agent", "reason"),
    "reopened": ("agent", "reason"),
    "labelled": ("decision", "value", "reviewer"),
    "closed": ("reviewer",),
    "alert": ("status", "alertname"),
}
#: Why a review opens: the dashboard score under ``alert_below``, or more than ``drop_alert`` under the 7 d score.
REASONS = ("below", "drop")
ALERT_STATUSES = ("firing", "resolved")
#: A review id: safe in a URL path segment, a changelog key and a shell argument.
REVIEW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


class ReviewEvent(NamedTuple):
    """One line of a review file: what happened to which review, when, and every field the line holds."""

    id: str
    ts: datetime
    review: str
    event: str
    data: Mapping[str, Any]
    path: str
    line: int
    generation: int = 0


#: The fields :func:`packed` holds as a :class:`Listed` when they are lists longer than :data:`PACK_FROM`: an
#: opening's failing decisions. Only those: every reader of an event's other fields takes their values as they are.
PACKED = ("failed",)
PACK_FROM = 16


class Listed(Sequence[Any]):
    """A long list among an event's fields, held as its compact JSON text and decoded each time it is read.

    An opening lists up to a few hundred failing decisions, each an object of five fields: ~600 bytes as Python dicts
    and strings, ~150 as text. The queue keeps every event it folds, and a start that opens a review for each of 80
    agents held ~7 MB of them at once. ``ids``: the ``id`` strings of the entries that are objects (what a review's
    progress counts), kept decoded. Equal to a list with the same items."""

    __slots__ = ("_length", "ids", "text")

    def __init__(self, items: Sequence[Any]) -> None:
        self.text = json.dumps(items, ensure_ascii=False, separators=(",", ":"))
        self._length = len(items)
        self.ids = tuple(entry_ids(items))

    def items(self) -> list[Any]:
        """The list, decoded afresh."""
        items: list[Any] = json.loads(self.text)
        return items

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        return self.items()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Listed):
            return self.text == other.text
        return isinstance(other, list) and self.items() == other

    __hash__ = None  # type: ignore[assignment]  # (as a list's)

    def __repr__(self) -> str:
        return f"Listed({self.items()!r})"


def packed(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its :data:`PACKED` fields that are lists longer than :data:`PACK_FROM` made a :class:`Listed`
    (in place)."""
    for key in PACKED:
        value = data.get(key)
        if isinstance(value, list) and len(value) > PACK_FROM:
            data[key] = Listed(value)
    return data


def entry_ids(items: Iterable[Any]) -> list[str]:
    """The ``id`` strings of the entries of a listed field that are objects with one (a hand-written line may list
    anything)."""
    return [d["id"] for d in items if isinstance(d, dict) and isinstance(d.get("id"), str)]


def listed(value: object) -> Sequence[Any]:
    """An event field read as a list: the list, or a :class:`Listed`'s items; ``[]`` for anything else."""
    if isinstance(value, Listed):
        return value.items()
    return value if isinstance(value, list) else []


def valid_review_id(text: object) -> bool:
    """True for a string a review id may be (see :data:`REVIEW_ID`; never ``--``, which would end a key comment)."""
    return isinstance(text, str) and REVIEW_ID.fullmatch(text) is not None and "--" not in text


def event_id(raw: bytes) -> str:
    """The id of a line without an ``id`` field: 16 hex digits of SHA-256 of its bytes (without its ending)."""
    return hashlib.sha256(raw).hexdigest()[:16]


def _refusal(obj: Mapping[str, Any]) -> str | None:
    """Why a decoded line is no review event (a reject reason), or None."""
    for key in ("ts", "review", "event"):
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            return f"missing_{key}"
    if not valid_review_id(obj["review"]):
        return "bad_review"
    kind = obj["event"]
    if kind not in EVENT_FIELDS:
        return "bad_event"
    for key in EVENT_FIELDS[kind]:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            return f"missing_{key}"
    if kind in ("opened", "reopened") and obj["reason"] not in REASONS:
        return "bad_reason"
    if kind == "labelled" and obj["value"] not in LABEL_VALUES:
        return "bad_value"
    if kind == "closed" and not isinstance(obj.get("note", ""), str):
        return "bad_note"
    if kind == "alert" and obj["status"] not in ALERT_STATUSES:
        return "bad_status"
    return None


def parse_review_event(raw: bytes, path: str, line: int, generation: int = 0) -> ReviewEvent | Reject:
    """One line of a review file (without its ending) as a :class:`ReviewEvent`, or the :class:`Reject` saying why
    not; never raises on bad input."""
    obj = load_object(raw, path, line)
    if isinstance(obj, Reject):
        return obj
    reason = _refusal(obj)
    if reason is None:
        try:
            ts = parse_ts(obj["ts"])
        except TimestampError:
            reason = "bad_ts"
    if reason is not None:
        return Reject(path, line, reason, snippet(raw))
    given = obj.get("id")
    eid = given if isinstance(given, str) and given else event_id(raw)
    return ReviewEvent(eid, ts, obj["review"], obj["event"], obj, path, line, generation)


def scan_reviews(root: Path, glob: str = "reviews/*.jsonl") -> tuple[list[ReviewEvent], list[Reject]]:
    """Every review event under ``root`` (the files ``glob`` matches, in read order) and the lines refused: what a
    second reader of the files folds into the queue (``honestyd reviews --state``). Confined like batch mode: no
    symlink out of the root is followed, no FIFO or device is read."""
    events: list[ReviewEvent] = []
    rejects: list[Reject] = []
    for info in walk(root):
        if not glob_match(glob, info.path):
            continue
        try:
            raw = read_regular(info.abspath)
        except OSError:
            continue
        for number, line in enumerate(terminated_lines(raw), start=1):
            parsed = parse_review_event(strip_ending(line), info.path, number)
            (events if isinstance(parsed, ReviewEvent) else rejects).append(parsed)  # type: ignore[arg-type]
    return events, rejects
