"""Log lines cannot be forged (daemon/logescape.py): unit tests with real loggers."""

from __future__ import annotations

import io
import logging
import re
import sys

import pytest

from daemon.logescape import DAEMON_FORMAT, EscapingFormatter, configure, escape

FORGED = "2026-01-01 00:00:00,000 INFO honestyd: forged"
#: What an agent writes to fake a record: clear the screen, return to column 0, start a new "record".
EVIL = f"x\x1b[2J\r\n{FORGED}\r{FORGED}\u2028{FORGED}\x85{FORGED}"
#: The same within one line of a file (a raw LF would end the line there): ESC, CR and the rest stay.
EVIL_LINE = EVIL.replace("\n", "")
#: Every character the log must never carry raw (a record's lines are joined by \n alone).
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def _format(record: logging.LogRecord, fmt: str = DAEMON_FORMAT) -> str:
    return EscapingFormatter(fmt).format(record)


def _record(msg: str, *args: object, exc_info: logging._SysExcInfoType | None = None) -> logging.LogRecord:
    return logging.LogRecord("honestyd.ingest", logging.WARNING, __file__, 1, msg, args, exc_info)


# --- escaping


def test_escape_writes_every_control_separator_and_bidi_character_visibly() -> None:
    assert escape("ESC\x1b[2J CR\r LF\n TAB\t NUL\x00 DEL\x7f NEL\x85 CSI\x9b") == (
        "ESC\\x1b[2J CR\\x0d LF\\x0a TAB\\x09 NUL\\x00 DEL\\x7f NEL\\x85 CSI\\x9b")
    assert escape("a\u2028b\u2029c \u202eevil\u202c \u2066iso\u2069 \u200f\u061c \ud800") == (
        "a\\u2028b\\u2029c \\u202eevil\\u202c \\u2066iso\\u2069 \\u200f\\u061c \\ud800")
    plain = "ünïcødé 名前 🤖 \\x1b stays as typed; quotes \" ' and % too"
    assert escape(plain) == plain


def test_a_record_with_forged_lines_in_its_arguments_is_one_escaped_line() -> None:
    text = _format(_record("%s: rejected (%s): %s", f"heartbeats/{EVIL}.jsonl:3", "not_json", EVIL))
    assert "\n" not in text and not RAW.search(text)
    assert text.count(FORGED) == 8 and "\\x1b[2J\\x0d\\x0a" + FORGED in text
    assert STAMP.match(text)


def test_a_traceback_keeps_its_lines_each_escaped_and_indented() -> None:
    try:
        raise ValueError(f"bad agent {EVIL}")
    except ValueError:
        text = _format(_record("job %s failed", EVIL, exc_info=sys.exc_info()))
    first, *rest = text.split("\n")
    assert STAMP.match(first) and "Traceback (most recent call last):" in rest[0]
    assert rest and all(line.startswith("  ") for line in rest)  # only a record's first line is at column 0
    assert not RAW.search(text)
    assert any(line.startswith("  ValueError: bad agent x\\x1b[2J") for line in rest)
    assert any(line == f"  {FORGED}\\x0d{FORGED}\\u2028{FORGED}\\x85{FORGED}" for line in rest)


def test_a_traceback_cached_by_a_plain_formatter_is_escaped_all_the_same() -> None:
    try:
        raise RuntimeError(f"x\n{FORGED}\x1b[2J")
    except RuntimeError:
        record = _record("boom", exc_info=sys.exc_info())
    logging.Formatter().format(record)  # another handler went first: record.exc_text holds the raw text
    assert record.exc_text is not None and "\x1b" in record.exc_text
    text = _format(record)
    assert not RAW.search(text) and all(line.startswith("  ") for line in text.split("\n")[1:])
    record.exc_info = None  # a record carrying only exc_text (as a filter may leave it)
    assert not RAW.search(_format(record))


def test_stack_info_is_escaped_too() -> None:
    record = _record("with a stack")
    record.stack_info = f"Stack (most recent call last):\n  File \"{EVIL}\", line 1"
    text = _format(record)
    assert not RAW.search(text) and all(line.startswith("  ") for line in text.split("\n")[1:])


class _Drop(logging.Filter):
    """Drops the records whose message holds "drop" (a stand-in for any filter: a rate limit, say)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "drop" not in record.getMessage()


def test_configure_installs_one_escaping_stderr_handler_that_composes_with_filters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    try:
        configure()
        handler = configure(logging.INFO, DAEMON_FORMAT, filters=[_Drop()])
        ours = [h for h in root.handlers if h not in before]
        assert ours == [handler] and root.level == logging.INFO  # the second call replaced the first's handler
        err = io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)  # the handler writes to stderr as it is now
        log = logging.getLogger("honestyd.test")
        log.info("agent %s", EVIL)
        log.info("please drop me %s", EVIL)
        lines = err.getvalue().splitlines()
        assert len(lines) == 1 and STAMP.match(lines[0]) and not RAW.search(err.getvalue())
    finally:
        for h in [h for h in root.handlers if h not in before]:
            root.removeHandler(h)
        root.setLevel(level)
