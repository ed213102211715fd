"""Logging a flood cannot turn into a flood of lines: repeats of one line are counted, not written.

:class:`RepeatFilter` sits on a handler (``honestyd run`` puts one on each root handler, see :func:`install`). Per
(logger, level, message template) it writes the first ``burst`` records of a ``period`` and counts the rest; when
the period ends, one line says how many were left out. It is a Filter, not a Formatter or a Handler, so it
composes with whatever formats the lines. :func:`loop_exception_handler` turns the event loop's "out of file
descriptors" reports (one traceback per failed ``accept()``) into one line each, which the filter then counts.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Lines of one kind written per period before the rest are only counted.
BURST = 5
#: Seconds after the first line of a kind before its count is written and it may be written again.
PERIOD = 60.0
#: Kinds tracked at once; beyond that a new kind passes unfiltered (message templates are few: a full table
#: means lines built with their values in the template, which counting by template would not help).
MOST_KINDS = 1024
#: accept() failures the loop retries by itself: the process is out of descriptors or memory for a moment.
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

#: ``extra={BUDGETED: True}`` marks a record whose writer limits its own rate (say N a minute per file, as
#: configured): this filter passes it, or the two limits would stack and the configured one would not hold.
BUDGETED = "budgeted"

Key = tuple[str, int, str]


@dataclass
class _Kind:
    """One (logger, level, template) in its current period."""

    started: float
    seen: int = 0
    left_out: int = 0
    last: logging.LogRecord | None = None


class RepeatFilter(logging.Filter):
    """Writes the first ``burst`` records of each kind per ``period``, counts the rest, then writes the count.

    The count is written (to ``handler``, the handler this filter sits on) by the first record of any kind that
    comes after the period ended, or by :meth:`flush`, which the daemon calls every second or so. ``clock`` is
    monotonic seconds (a parameter, for tests).
    """

    def __init__(self, handler: logging.Handler, *, burst: int = BURST, period: float = PERIOD,
                 clock: Callable[[], float] = time.monotonic, most_kinds: int = MOST_KINDS) -> None:
        super().__init__()
        self.handler = handler
        self.burst = burst
        self.period = period
        self.clock = clock
        self.most_kinds = most_kinds
        self._kinds: dict[Key, _Kind] = {}
        self._lock = threading.Lock()  # records come from every thread

    def filter(self, record: logging.LogRecord) -> bool:
        """True: write ``record``; False: it is a repeat, counted."""
        if getattr(record, "repeat_count", None) is not None or getattr(record, BUDGETED, False):
            return True  # our own count line, or a line whose writer keeps a budget of its own (daemon/rejectlog.py)
        key = (record.name, record.levelno, str(record.msg))
        with self._lock:
            now = self.clock()
            ended = self._take_ended(now)
            kind = self._kinds.get(key)
            if kind is None and len(self._kinds) < self.most_kinds:
                kind = self._kinds[key] = _Kind(now)
            passes = kind is None or kind.seen < self.burst
            if kind is not None:
                kind.seen += 1
                if not passes:
                    kind.left_out += 1
                    kind.last = record
        self._write(ended)  # outside the lock: the handler calls this filter again for each
        return passes

    def flush(self) -> None:
        """Write the counts of the kinds whose period has ended."""
        with self._lock:
            ended = self._take_ended(self.clock())
        self._write(ended)

    def _take_ended(self, now: float) -> list[tuple[_Kind, float]]:
        """Drop the kinds whose period ended (hold the lock); those with records left out, and how long they ran."""
        done = [key for key, kind in self._kinds.items() if now - kind.started >= self.period]
        ended = []
        for key in done:
            kind = self._kinds.pop(key)
            if kind.left_out:
                ended.append((kind, now - kind.started))
        return ended

    def _write(self, ended: list[tuple[_Kind, float]]) -> None:
        for kind, seconds in ended:
            self.handler.handle(count_record(kind, seconds))


def count_record(kind: _Kind, seconds: float) -> logging.LogRecord:
    """The line that stands for the records of ``kind`` left out: the last of them, and how many there were."""
    last = kind.last
    assert last is not None
    try:
        text = last.getMessage()
    except (TypeError, ValueError):  # arguments that do not fit the template: the template alone
        text = str(last.msg)
    record = logging.LogRecord(last.name, last.levelno, last.pathname, last.lineno,
                               "%s [repeated %d more times in %.0f s]", (text, kind.left_out, seconds), None)
    record.repeat_count = kind.left_out
    return record


def install(logger: logging.Logger | None = None, **options: Any) -> list[RepeatFilter]:
    """Put a :class:`RepeatFilter` on each handler of ``logger`` (the root logger by default) that has none."""
    target = logger if logger is not None else logging.getLogger()
    added = []
    for handler in target.handlers:
        if not any(isinstance(f, RepeatFilter) for f in handler.filters):
            repeat = RepeatFilter(handler, **options)
            handler.addFilter(repeat)
            added.append(repeat)
    return added


def flush(logger: logging.Logger | None = None) -> None:
    """Write the counts due on every handler of ``logger`` (the root logger by default)."""
    target = logger if logger is not None else logging.getLogger()
    for handler in target.handlers:
        for f in handler.filters:
            if isinstance(f, RepeatFilter):
                f.flush()


#: Where the loop's resource errors are logged (the logger asyncio itself would use).
LOOP_LOG = logging.getLogger("asyncio")


def loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler: "out of descriptors" as one line without a traceback, the rest as usual.

    asyncio reports every failed ``accept()`` with a traceback and retries a second later; when descriptors run
    out that is a traceback per queued connection per second, which is what filled the journal.
    """
    exc = context.get("exception")
    if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS:
        LOOP_LOG.error("%s: %s (retried in a second; connections are capped by [api] max_connections)",
                       context.get("message", "resource error"), exc.strerror)
        return
    loop.default_exception_handler(context)
