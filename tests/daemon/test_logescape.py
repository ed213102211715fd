"""Log lines cannot be forged (daemon/logescape.py) and rejected lines are logged at a bounded rate
(daemon/rejectlog.py): unit tests with real loggers, then ``honestyd ingest`` and the daemon as subprocesses."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.records import Reject
from collectors.rfc3339 import format_ts
from daemon.config import Config, Limits
from daemon.ingest import Ingester
from daemon.logescape import DAEMON_FORMAT, EscapingFormatter, configure, escape
from daemon.rejectlog import RejectLog
from daemon.store import Store
from tests.conftest import Run
from tests.daemon_harness import daemon, stop, write_config

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


# --- rejected lines: N per file per minute, then a summary


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _reject(path: str, line: int) -> Reject:
    return Reject(path, line, "not_json", f"garbage {line} {EVIL}")


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_rejects_are_logged_n_per_file_per_minute_then_summed_up(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "test.rejects")
    clock = Clock()
    rejects = RejectLog(clock, logging.getLogger("test.rejects"))
    for i in range(25):
        rejects.reject(_reject("heartbeats/a.jsonl", i + 1), 10)
        clock.now += 1
    for i in range(3):
        rejects.reject(_reject("heartbeats/b.jsonl", i + 1), 10)  # another file has its own budget
    logged = _messages(caplog)
    assert [m.split(":")[1] for m in logged[:10]] == [str(i + 1) for i in range(10)]
    assert len(logged) == 13 and all(m.startswith("heartbeats/b.jsonl") for m in logged[10:])
    caplog.clear()
    rejects.flush()  # a.jsonl's minute began 28 s ago: not over, nothing to say yet
    assert caplog.records == []
    clock.now += 40
    rejects.reject(_reject("heartbeats/a.jsonl", 26), 10)  # a new minute: first the summary, then this one
    assert _messages(caplog) == ["… and 15 more rejected lines in heartbeats/a.jsonl in the last minute",
                                 f"heartbeats/a.jsonl:26: rejected (not_json): {_reject('', 26).snippet[:80]}"]
    caplog.clear()
    clock.now += 61
    rejects.flush()  # b.jsonl logged all of its three: no summary for it
    assert caplog.records == []
    for i in range(12):
        rejects.reject(_reject("heartbeats/c.jsonl", i + 1), 0)  # 0: never a line each, only the summary
    rejects.flush(everything=True)
    assert _messages(caplog) == ["… and 12 more rejected lines in heartbeats/c.jsonl in the last minute"]


def test_the_ingester_counts_every_reject_and_logs_the_limit(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "heartbeats" / "bad.jsonl").write_text("".join(f"not json {i}\n" for i in range(30)))
    clock = Clock()
    config = Config(limits=Limits(reject_log_per_minute=4))
    caplog.set_level(logging.WARNING, "honestyd.ingest")
    with Store.open(tmp_path / "h.db") as store:
        stats = Ingester(store, root, config, reject_log=RejectLog(clock)).scan()
        assert stats.rejects[("heartbeats", "not_json")] == 30  # the metric's figure: every one
        assert len(store.rejects()) == 30
    logged = [m for m in _messages(caplog) if "bad.jsonl" in m]
    assert len(logged) == 4 and all("rejected (not_json)" in m for m in logged)


def test_honestyd_ingest_logs_the_limit_escaped_and_a_summary(tmp_path: Path, honestyd: Run) -> None:
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "heartbeats" / "bad.jsonl").write_text("".join(f"{EVIL_LINE} {i}\n" for i in range(30)), encoding="utf-8")
    proc = honestyd("ingest", "--state", root, "--db", tmp_path / "h.db")
    lines = proc.stderr.splitlines()
    assert not RAW.search(proc.stderr) and not any(line.startswith(FORGED[:10]) for line in lines)
    assert sum("rejected (not_json)" in line for line in lines) == 10  # [limits] reject_log_per_minute
    assert "… and 20 more rejected lines in heartbeats/bad.jsonl in the last minute" in lines
    assert "30 rejects" in proc.stdout


# --- the daemon


def _line(agent: str, i: int, ts: datetime, text: str) -> str:
    return json.dumps({"id": f"f-{i}", "ts": format_ts(ts), "agent": agent, "kind": "dm", "text": text}) + "\n"


def test_the_daemon_log_has_no_raw_control_character_and_no_forged_record(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    evil_agent = f"ag{EVIL}"
    good = "".join(_line(evil_agent, i, now - timedelta(minutes=i + 1), f"note {EVIL}") for i in range(6))
    bad = "".join(f'{{"broken": "{EVIL_LINE}" {i}\n' for i in range(30))
    # The file name carries the forgery too: paths are logged with every reject.
    (root / "heartbeats" / f"e\x1b[2J\r\n{FORGED}.jsonl").write_text(good + bad, encoding="utf-8")
    # A short max_agent_name holds the agent back, so its name is logged as well.
    config = write_config(tmp_path / "config.toml", "[limits]\nmax_agent_name = 16\n")
    with daemon(tmp_path, root, config=config) as d:
        assert d.metric("honesty_ingest_rejects_total", source="heartbeats", reason="not_json") == 30
        assert d.metric("honesty_agents_over_limit", reason="agent_name_too_long") == 1
        assert stop(d)[0] == 0
        log = d.log.read_bytes().decode("utf-8")
    assert not RAW.search(log)
    assert "\\x1b[2J" in log and "is not exported to /metrics" in log  # the hostile text did reach the log
    lines = log.splitlines()
    assert not any(line.startswith(FORGED[:10]) for line in lines)
    assert all(STAMP.match(line) or line.startswith("  ") for line in lines), log
    assert sum("rejected (not_json)" in line for line in lines) == 10
    assert sum("more rejected lines in" in line for line in lines) == 1  # the other 20, summed up at the stop
