"""Markdown of untrusted text and the number formats of the changelog's entries (pure).

Agent names come from the agents themselves, so every one is escaped (:func:`md_text`) before it reaches the
file: no agent can start a line, open an HTML comment, forge a heading or a key, or add a table cell.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from urllib.parse import quote

from collectors.rfc3339 import format_ts
from scorers.score import AgentResult, display_percent

# Characters that would let untrusted text change the Markdown structure: backslash-escaped, or
# turned into entities where a backslash does not stop an HTML parser.
_ESCAPES = {c: "\\" + c for c in "\\`*_[]|#~"} | {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Control and format characters, lone surrogates and line/paragraph separators: some end a line
# in some renderer (\r, \v, U+2028), bidi overrides reorder what a reader sees, and a lone
# surrogate (legal in JSON) cannot even be encoded as UTF-8. All become U+FFFD.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_REPLACEMENT = "\ufffd"


def _clean(text: str) -> str:
    return "".join(_REPLACEMENT if unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch for ch in text)


def md_text(text: str) -> str:
    """Untrusted text as inline Markdown that renders literally and stays on one line (also in a table cell)."""
    return "".join(_ESCAPES.get(ch, ch) for ch in _clean(text))


def md_code(text: str) -> str:
    """Text as a one-line code span, fenced with more backticks than any run inside it."""
    text = _clean(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def key_part(text: str) -> str:
    """Text as part of an entry's key: percent-encoded, so only key characters are left."""
    # `-` is encoded too so no `--` can end the key's HTML comment.
    return quote(text, safe="", errors="surrogatepass").replace("-", "%2D")


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC; a naive datetime is taken as UTC (the daemon works in UTC throughout)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def utc_stamp(moment: datetime) -> str:
    """RFC 3339 UTC to the second, as entries show their time."""
    return format_ts(utc(moment).replace(microsecond=0))


def number(x: float) -> str:
    """A weight or rate: two decimals (0.30), the exact repr when two decimals would round."""
    two = f"{x:.2f}"
    return two if float(two) == x else repr(x)


def points(fraction: float) -> str:
    """A fraction as percentage points: ``0.7`` → ``70``."""
    return f"{round(100 * fraction, 6):g}"


def percent(result: AgentResult | None, floor: int) -> str:
    """An agent's displayed score: ``87 %``, ``INSUFFICIENT · N=<5``, or ``—`` for no result."""
    if result is None:
        return "—"
    if result.insufficient or result.score is None:
        return f"INSUFFICIENT · N=<{floor}"
    return f"{display_percent(result.score)} %"


def plural(n: int, noun: str) -> str:
    """``1 decision``, ``2 decisions``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
