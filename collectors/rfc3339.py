"""RFC 3339 timestamps as the spec reads them (SCORING.md, "Time").

Accepted: ``YYYY-MM-DDTHH:MM:SS[.fraction]`` then ``Z`` or ``±HH:MM``; a space may replace the
``T``; ``t`` and ``z`` may be lower case; fractions beyond microseconds are truncated. A
timestamp without an offset is invalid. Results are aware datetimes in UTC.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(ts: datetime) -> int:
    """Aware datetime → integer microseconds since the epoch (exact, sortable)."""
    delta = ts - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


#: Below this many microseconds from the epoch either way (2^32 s: the years 1834 to 2106), ``us / 1e6`` is within
#: 0.24 µs of the exact time (a double near 2^32 has 2^-21 s between neighbours), so ``fromtimestamp``, which
#: rounds to the nearest microsecond, gives the exact time.
_FLOAT_EXACT_US = 2**32 * 1_000_000


def exact_from_us(us: int) -> datetime:
    """:func:`from_us` without a float on the way (the reference the fast paths are tested against)."""
    return EPOCH + timedelta(0, 0, us)


def from_us(us: int) -> datetime:
    """Integer microseconds since the epoch → aware UTC datetime, exact: through a float in 1834-2106 (a third
    faster, and a first evaluation makes a few million), else through a timedelta."""
    if -_FLOAT_EXACT_US < us < _FLOAT_EXACT_US:
        return datetime.fromtimestamp(us / 1e6, UTC)
    return exact_from_us(us)


def from_us_many(us: Sequence[int]) -> list[datetime]:
    """``[from_us(u) for u in us]``, about twice as fast for times in 1834-2106 (a model cache holds a million).

    Through a float there, exact either way (see ``_FLOAT_EXACT_US``); a sequence with any time outside takes the
    exact path whole.
    """
    if us and min(us) > -_FLOAT_EXACT_US and max(us) < _FLOAT_EXACT_US:
        return list(map(datetime.fromtimestamp, map(operator.truediv, us, itertools.repeat(1e6)),
                        itertools.repeat(UTC)))
    return list(map(EPOCH.__add__, map(timedelta, itertools.repeat(0), itertools.repeat(0), us)))


class TimestampError(ValueError):
    """Raised for a string that is not an RFC 3339 timestamp with an offset."""


def parse_ts(value: object) -> datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime, or raise TimestampError."""
    if not isinstance(value, str):
        raise TimestampError(f"timestamp must be a string, not {type(value).__name__}")
    m = _RFC3339.fullmatch(value)
    if m is None:
        raise TimestampError(f"not an RFC 3339 timestamp with an offset: {value[:64]!r}")
    if m.group(8) == "Z" and value[10] == "T":
        # The usual form, which C's fromisoformat reads as it stands, to an aware time in UTC itself (digits of a
        # fraction beyond six dropped, as below): tests/collectors/test_fuzz.py checks it against the general path.
        try:
            return datetime.fromisoformat(value)
        except ValueError as exc:
            raise TimestampError(f"invalid date or time: {value[:64]!r}") from exc
    if m.group(8):
        tz = UTC
    else:
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise TimestampError(f"offset out of range: {value[:64]!r}")
        sign = 1 if m.group(9) == "+" else -1
        tz = timezone(sign * timedelta(hours=oh, minutes=om))
    # The regex has validated the shape; C's fromisoformat does the arithmetic.
    fraction = m.group(7)
    text = f"{value[:10]}T{value[11:19]}" + (f".{fraction[:6].ljust(6, '0')}" if fraction else "")
    try:
        naive = datetime.fromisoformat(text)
    except ValueError as exc:
        raise TimestampError(f"invalid date or time: {value[:64]!r}") from exc
    try:
        return naive.replace(tzinfo=UTC) if tz is UTC else naive.replace(tzinfo=tz).astimezone(UTC)
    except OverflowError as exc:
        raise TimestampError(f"invalid date or time: {value[:64]!r}") from exc


def parse_ts_us(value: object) -> int:
    """``to_us(parse_ts(value))``: the same reading, refusals included, in one call for the usual form (the store keeps
    times as integer microseconds; tests/collectors/test_fuzz.py holds the two readings equal)."""
    if not isinstance(value, str):
        return to_us(parse_ts(value))
    m = _RFC3339.fullmatch(value)
    if m is None or m.group(8) != "Z" or value[10] != "T":
        return to_us(parse_ts(value))
    try:
        delta = datetime.fromisoformat(value) - EPOCH  # as parse_ts's own fast path
    except ValueError as exc:
        raise TimestampError(f"invalid date or time: {value[:64]!r}") from exc
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_ts(ts: datetime) -> str:
    """Render a UTC datetime as RFC 3339 with ``Z`` (microseconds only when present)."""
    ts = ts.astimezone(UTC)
    # Not strftime("%Y"): glibc does not zero-pad years before 1000 ("1-05-31T…"), which parse_ts then refuses, so
    # a label POSTed with such a ts was accepted and then rejected at ingest (tests/collectors/test_fuzz.py round trip).
    text = f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}T{ts.hour:02d}:{ts.minute:02d}:{ts.second:02d}"
    if ts.microsecond:
        text += f".{ts.microsecond:06d}"
    return text + "Z"


_DURATION = re.compile(r"(\d+)(s|m|h|d)", re.ASCII)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(value: object) -> timedelta:
    """Parse ``30s``, ``5m``, ``24h`` or ``7d`` into a timedelta; raise ValueError otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"duration must be a string like '24h', not {value!r}")
    m = _DURATION.fullmatch(value.strip())
    if m is None:
        raise ValueError(f"duration must look like 30s, 5m, 24h or 7d, not {value!r}")
    try:
        return timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])
    except (OverflowError, ValueError) as exc:
        # "99999999999d" overflowed timedelta: OverflowError escaped as a crash (tests/collectors/test_fuzz.py).
        raise ValueError(f"duration {value!r} is too long") from exc


def format_duration(delta: timedelta) -> str:
    """Render a timedelta in the largest unit that divides it exactly (``86400s`` → ``1d``)."""
    seconds = int(delta.total_seconds())
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNITS[unit] == 0:
            return f"{seconds // _UNITS[unit]}{unit}"
    return f"{seconds}s"
