"""Parsers for one JSON Lines record: heartbeat events (spec 1.1) and reviewer labels (spec 1.3).

Each parser takes the line's bytes without its ending and returns a record or a
:class:`~collectors.records.Reject` carrying the reason; nothing here raises on bad input.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from collectors import citations as cit
from collectors.records import Event, Label, Reject
from collectors.rfc3339 import TimestampError, parse_ts

MAX_LINE_BYTES = 1024 * 1024
#: The decoder's scanner, (text, index) → (value, end); set by JSONDecoder.__init__, absent from typeshed.
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
SNIPPET_CHARS = 200


def snippet(raw: bytes) -> str:
    """The start of a refused line, decoded leniently, for the rejects table."""
    return raw[: SNIPPET_CHARS * 4].decode("utf-8", "replace")[:SNIPPET_CHARS]


def strip_ending(raw: bytes) -> bytes:
    """The line without its ``\\n`` or ``\\r\\n``."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw


def load_object(raw: bytes, path: str, line: int) -> dict[str, Any] | Reject:
    if len(raw) > MAX_LINE_BYTES:
        return Reject(path, line, "oversized", snippet(raw))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Reject(path, line, "not_utf8", snippet(raw))
    try:
        # The decoder's own scanner first: json.loads is it behind two Python-level calls, which cost a third of
        # its instructions on a heartbeat line (23.3k against 14.7k). It must consume the whole line; anything else
        # (white space around the value, trailing data, no value) goes to json.loads, which then accepts or refuses
        # it exactly as before.
        try:
            obj, end = _scan(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
            obj = json.loads(text)
    except (ValueError, RecursionError):
        # ValueError, not just JSONDecodeError: an integer literal over 4,300 digits raises a plain ValueError
        # (sys.int_info.str_digits_check_threshold), which aborted every later scan (tests/collectors/test_fuzz.py).
        return Reject(path, line, "not_json", snippet(raw))
    if not isinstance(obj, dict):
        return Reject(path, line, "not_object", snippet(raw))
    # A "\ud800" escape is valid JSON but not text: the store could not encode it and would stall on the line.
    if (b"\\ud" in raw or b"\\uD" in raw) and not _encodable(obj):
        return Reject(path, line, "lone_surrogate", snippet(raw))
    return obj


def _encodable(obj: object) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _nonempty_str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _str_list(value: object) -> tuple[str, ...]:
    """A string or a list of strings (other items ignored) as a tuple of non-empty strings."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str) and v)
    return ()


def _missing(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if _nonempty_str(obj.get(key)) is None:
            return key
    return None


def from_json_list(text: str) -> tuple[str, ...]:
    """The tuple of strings a JSON array of strings holds (as the store keeps alternatives and subjects)."""
    return tuple(json.loads(text)) if text != "[]" else ()


def parse_event(raw: bytes, path: str, line: int, repo: str, generation: int = 0) -> Event | Reject:
    """Parse one heartbeat line (without its ending) into an :class:`Event` or a :class:`Reject`."""
    return read_event(raw, path, line, repo, generation, parse_ts, Event)


T = TypeVar("T")


def read_event(raw: bytes, path: str, line: int, repo: str, generation: int, ts_of: Callable[[object], Any],
               make: Callable[..., T]) -> T | Reject:
    """:func:`parse_event`'s reading of one line, its record built by ``make`` from the fields in :class:`Event`'s
    order, the time read by ``ts_of`` (:func:`parse_ts`, or :func:`~collectors.rfc3339.parse_ts_us` for the store's
    integer microseconds): the ingest builds its rows straight from the fields, with no Event to unpack again."""
    obj = load_object(raw, path, line)
    if isinstance(obj, Reject):
        return obj
    get = obj.get
    ts_raw, agent, kind = get("ts"), get("agent"), get("kind")
    if not (isinstance(ts_raw, str) and ts_raw and isinstance(agent, str) and agent and isinstance(kind, str)
            and kind):
        for name, value in (("ts", ts_raw), ("agent", agent), ("kind", kind)):
            if not isinstance(value, str) or not value:
                return Reject(path, line, f"missing_{name}", snippet(raw))
    try:
        ts = ts_of(ts_raw)
    except TimestampError:
        return Reject(path, line, "bad_ts", snippet(raw))
    event_id = get("id")
    if not isinstance(event_id, str) or not event_id:
        event_id = hashlib.sha256(raw).hexdigest()[:16]
    text = get("text")
    text = text if isinstance(text, str) else ""
    thread, prompt, reason, corrects = get("thread"), get("prompt"), get("reason"), get("corrects")
    cites, alternatives, subject = get("citations"), get("alternatives"), get("subject")
    # Positional, in field order, the small checks inline rather than called: this runs once per line of every log.
    return make(
        event_id, ts, agent, kind, path, line,
        thread if isinstance(thread, str) else None,
        text,
        cit.extract(text, () if cites is None else _str_list(cites), repo),
        prompt if isinstance(prompt, str) else None,
        reason if isinstance(reason, str) and reason else None,  # as _nonempty_str
        () if alternatives is None else _str_list(alternatives),  # mostly absent: no call for those
        () if subject is None else _str_list(subject),
        corrects if isinstance(corrects, str) and corrects else None,
        generation,
    )


LABEL_VALUES = ("up", "down")
#: A label's note is kept up to this many characters (the pages write at most this many).
MAX_NOTE = 1000


def parse_label(raw: bytes, path: str, line: int, generation: int = 0) -> Label | Reject:
    """Parse one reviewer-label line into a :class:`Label` or a :class:`Reject`."""
    obj = load_object(raw, path, line)
    if isinstance(obj, Reject):
        return obj
    missing = _missing(obj, ("ts", "decision", "value", "reviewer"))
    if missing:
        return Reject(path, line, f"missing_{missing}", snippet(raw))
    if obj["value"] not in LABEL_VALUES:
        return Reject(path, line, "bad_value", snippet(raw))
    try:
        ts = parse_ts(obj["ts"])
    except TimestampError:
        return Reject(path, line, "bad_ts", snippet(raw))
    note = obj.get("note")
    return Label(ts, obj["decision"], obj["value"], obj["reviewer"], path, line, generation,
                 note[:MAX_NOTE] if isinstance(note, str) and note else None)
