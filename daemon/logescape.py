"""Log lines nobody can forge: text from the state is escaped before it reaches the log.

Agent names, log lines, paths and snippets end up in log messages, and an agent writes them. With an ESC, a
CR or a line break intact, an agent could clear a terminal, overwrite the start of a line, or print a whole
fake record (``\\n2026-06-01 12:00:00 INFO honestyd: …``). :class:`EscapingFormatter` writes every control
character of a message as a visible escape (``\\x1b``, ``\\u2028``), so one record is one line. A traceback or
stack keeps its own lines, each escaped and indented: only the first line of a record starts at column 0.

:func:`configure` installs it on one stderr handler of the root logger, for the daemon and every command;
filters passed to it (a rate limit, say) go on that handler, so they compose with the formatter.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence

#: The daemon's record format (``honestyd run``, ``honestyd demo``); other commands print the message alone.
DAEMON_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: C0 controls (ESC, CR, LF, TAB, NUL…), DEL and C1 (NEL, CSI…); the line and paragraph separators; the bidi
#: marks, embeddings, overrides and isolates that reorder what a reader sees; lone surrogates, which no UTF-8
#: stream can carry.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

_HANDLER = "honestyd-stderr"


def _escape_one(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape(text: str) -> str:
    """``text`` with every control, separator and bidi character written as a ``\\xNN``/``\\uNNNN`` escape."""
    return _UNSAFE.sub(_escape_one, text)


def _block(text: str) -> str:
    """A traceback or stack below its record: each line escaped and indented."""
    return "\n".join("  " + escape(line) for line in text.split("\n"))


class EscapingFormatter(logging.Formatter):
    """A :class:`logging.Formatter` whose records are one escaped line, plus the escaped lines of a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as text (see the module's docstring); the record's cached ``exc_text`` is not trusted."""
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = escape(self.formatMessage(record))
        # Formatted here, not taken from record.exc_text: another handler's plain formatter may have cached it.
        trace = self.formatException(record.exc_info) if record.exc_info else record.exc_text
        if trace:
            text += "\n" + _block(trace)
        if record.stack_info:
            text += "\n" + _block(self.formatStack(record.stack_info))
        return text


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a record is emitted (as :data:`logging.lastResort` does)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure(level: int = logging.WARNING, fmt: str = "%(message)s",
              filters: Sequence[logging.Filter] = ()) -> logging.Handler:
    """Log to stderr through an :class:`EscapingFormatter` at ``level``; replaces the handler an earlier call set.

    Other handlers of the root logger are left alone. The default (WARNING, the message alone) is what Python
    prints when nothing is configured, escaped.
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER]:
        root.removeHandler(old)
    handler = _Stderr()
    handler.set_name(_HANDLER)
    handler.setFormatter(EscapingFormatter(fmt))
    for f in filters:
        handler.addFilter(f)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
