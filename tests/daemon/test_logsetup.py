"""The log rate limiter (daemon/logsetup.py): repeats of one line are written a few times, then counted.

Unit tests on a real handler writing to a buffer; the filter's clock is a parameter, so no test waits.
"""

from __future__ import annotations

import asyncio
import errno
import io
import logging
from collections.abc import Iterator

import pytest

from daemon.logsetup import LOOP_LOG, RepeatFilter, flush, install, loop_exception_handler


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def out(clock: Clock) -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger of its own whose one handler writes "LEVEL name: message" lines to a buffer, with the filter."""
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("test.logsetup")
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.DEBUG)
    install(logger, burst=3, period=60.0, clock=clock)
    yield logger, buffer
    logger.handlers = []


def lines(buffer: io.StringIO) -> list[str]:
    return buffer.getvalue().splitlines()


def test_a_flood_of_one_line_is_a_few_lines_and_a_count(out: tuple[logging.Logger, io.StringIO],
                                                        clock: Clock) -> None:
    logger, buffer = out
    for i in range(1000):
        logger.warning("refused a connection: %d open", i)
        clock.now += 0.001
    assert lines(buffer) == [f"WARNING test.logsetup: refused a connection: {i} open" for i in range(3)]
    flush(logger)  # the period has not ended: nothing more yet
    assert len(lines(buffer)) == 3
    clock.now += 60.0
    flush(logger)
    assert lines(buffer)[3:] == [
        "WARNING test.logsetup: refused a connection: 999 open [repeated 997 more times in 61 s]"]
    flush(logger)  # written once
    assert len(lines(buffer)) == 4
    logger.warning("refused a connection: %d open", 1000)  # a new period: written again
    assert lines(buffer)[4:] == ["WARNING test.logsetup: refused a connection: 1000 open"]


def test_the_count_comes_with_the_next_line_of_any_kind_when_nothing_flushes(
        out: tuple[logging.Logger, io.StringIO], clock: Clock) -> None:
    logger, buffer = out
    for _ in range(5):
        logger.error("store write failed")
    clock.now += 61.0
    logger.info("ingested %d records", 1)
    assert lines(buffer) == ["ERROR test.logsetup: store write failed"] * 3 + [
        "ERROR test.logsetup: store write failed [repeated 2 more times in 61 s]",
        "INFO test.logsetup: ingested 1 records",
    ]


def test_kinds_are_logger_level_and_template(out: tuple[logging.Logger, io.StringIO], clock: Clock) -> None:
    logger, buffer = out
    other = logging.getLogger("test.logsetup.child")  # propagates to the handler: a logger of its own kind
    for i in range(4):
        logger.warning("a %s", i)
        logger.error("a %s", i)  # the same template at another level
        logger.warning("b %s", i)
        other.warning("a %s", i)
    written = lines(buffer)
    for prefix in ("WARNING test.logsetup: a", "ERROR test.logsetup: a", "WARNING test.logsetup: b",
                   "WARNING test.logsetup.child: a"):
        assert [line for line in written if line.startswith(prefix + " ")] == [f"{prefix} {i}" for i in range(3)]
    assert len(written) == 12


def test_repeated_tracebacks_are_left_out_and_the_count_has_none(out: tuple[logging.Logger, io.StringIO],
                                                                 clock: Clock) -> None:
    logger, buffer = out
    for _ in range(50):
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError:
            logger.exception("accept failed")
    clock.now += 60.0
    flush(logger)
    assert buffer.getvalue().count("Traceback") == 3
    assert lines(buffer)[-1] == "ERROR test.logsetup: accept failed [repeated 47 more times in 60 s]"


def test_a_full_table_of_kinds_lets_new_kinds_through(clock: Clock) -> None:
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    repeat = RepeatFilter(handler, burst=1, period=60.0, clock=clock, most_kinds=2)
    handler.addFilter(repeat)
    logger = logging.getLogger("test.logsetup.full")
    logger.handlers, logger.propagate = [handler], False
    try:
        for _ in range(3):
            logger.warning("one")
            logger.warning("two")
            logger.warning("three")  # no room to track it: never held back
        assert lines(buffer) == ["one", "two", "three", "three", "three"]
    finally:
        logger.handlers = []


def test_install_adds_one_filter_per_handler_once(clock: Clock) -> None:
    logger = logging.getLogger("test.logsetup.install")
    logger.handlers = [logging.StreamHandler(io.StringIO()), logging.StreamHandler(io.StringIO())]
    try:
        assert len(install(logger, clock=clock)) == 2
        assert install(logger, clock=clock) == []
        assert [sum(isinstance(f, RepeatFilter) for f in h.filters) for h in logger.handlers] == [1, 1]
    finally:
        logger.handlers = []


def test_the_loops_out_of_descriptors_report_is_one_line_without_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.DEBUG, logger=LOOP_LOG.name):
            for _ in range(3):
                loop_exception_handler(loop, {"message": "socket.accept() out of system resource",
                                              "exception": OSError(errno.EMFILE, "Too many open files")})
            resource = list(caplog.records)
            caplog.clear()
            # Anything else goes to asyncio's own handler, traceback and all.
            loop_exception_handler(loop, {"message": "Exception in callback", "exception": ValueError("boom")})
    finally:
        loop.close()
    assert [(r.levelno, r.getMessage(), r.exc_info) for r in resource] == [(
        logging.ERROR, "socket.accept() out of system resource: Too many open files (retried in a second;"
                       " connections are capped by [api] max_connections)", None)] * 3
    [other] = caplog.records
    assert other.getMessage() == "Exception in callback" and other.exc_info is not None


def test_a_record_whose_writer_keeps_its_own_budget_passes() -> None:
    """Rejected lines are limited by [limits] reject_log_per_minute (daemon/rejectlog.py); the generic filter must not
    cut them to its own burst as well, or the configured budget would not hold."""
    from daemon.logsetup import BUDGETED

    handler = logging.Handler()
    f = RepeatFilter(handler, burst=2, period=60.0, clock=lambda: 0.0)
    plain = [f.filter(logging.LogRecord("x", logging.WARNING, "p", 1, "same %s", (i,), None)) for i in range(4)]
    budgeted = []
    for i in range(4):
        record = logging.LogRecord("x", logging.WARNING, "p", 1, "same %s", (i,), None)
        setattr(record, BUDGETED, True)
        budgeted.append(f.filter(record))
    assert plain == [True, True, False, False] and budgeted == [True] * 4
