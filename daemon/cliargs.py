"""The CLI's argument checks and its error handling: a user's mistake is one line and exit status 2.

Every check here runs before a command touches anything, so a mistake has no side effect: no database
created for a ``--db`` that was mistyped, no folder made in a ``--state`` that does not exist. The
checks are argparse ``type=`` functions (argparse reports them as ``argument --db: …``); the ones that
depend on the config (``run``'s state root and database) raise :class:`UsageError` from the command.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sqlite3
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import NoReturn

from collectors.rfc3339 import TimestampError, parse_duration, parse_ts

#: Exit status of a user's mistake (argparse's own), of a refusal, and of Ctrl-C (128 + SIGINT).
USAGE, INTERRUPTED = 2, 130
#: Exit status when whoever reads the output went away (``| head -1``): 128 + SIGPIPE, what a shell reports for a
#: program that SIGPIPE ends; honestyd keeps SIGPIPE ignored (the daemon's sockets need EPIPE, not death).
CLOSED_PIPE = 141
#: Errors of the file system that a wrong argument causes (anything else is the machine's, exit status 1).
_MISTAKES = (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError, FileExistsError)
_SQLITE_MAGIC = b"SQLite format 3\x00"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)


class UsageError(Exception):
    """A mistake in what the user asked for: reported as ``honestyd CMD: error: MESSAGE``, exit status 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (argparse's own add the whole usage above it)."""

    def error(self, message: str) -> NoReturn:
        """``honestyd CMD: error: MESSAGE`` and exit status 2."""
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


# --- values


def timestamp(value: str) -> datetime:
    """An RFC 3339 time, ``now``, or a date ``YYYY-MM-DD`` (midnight UTC)."""
    if value.strip().lower() == "now":
        return datetime.now(UTC)
    if _DATE.fullmatch(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            pass
        else:
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
    try:
        return parse_ts(value)
    except TimestampError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (give RFC 3339, 'now' or a date YYYY-MM-DD)") from exc


def day(value: str) -> date:
    """A date ``YYYY-MM-DD``."""
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from exc


def duration(value: str) -> str:
    """A window such as ``24h`` or ``7d``: kept as its name, checked here."""
    try:
        width = parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if width.total_seconds() <= 0:
        raise argparse.ArgumentTypeError(f"window must be longer than zero, not {value!r}")
    return value


def positive_int(value: str) -> int:
    """An integer of at least 1."""
    try:
        n = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from exc
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def seconds(*, zero: bool = False) -> Callable[[str], float]:
    """A finite number of seconds above zero (or at least zero)."""
    def parse(value: str) -> float:
        try:
            x = float(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from exc
        if not math.isfinite(x) or x < 0 or (x == 0 and not zero):
            least = "≥" if zero else ">"
            raise argparse.ArgumentTypeError(f"must be a finite number of seconds {least} 0, not {value}")
        return x
    return parse


def listen(value: str, *, lowest: int = 0) -> str:
    """``HOST:PORT`` (``run`` takes port 0, any free port, as it always has; a config file does not)."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not lowest <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 127.0.0.1:9478, not {value!r}")
    return value


def configured_listen(value: str) -> str:
    """``HOST:PORT`` as ``[daemon] listen`` takes it (port 1 to 65535)."""
    return listen(value, lowest=1)


# --- paths (each check reads, never writes)


def _stat(value: str) -> os.stat_result | None:
    try:
        return os.stat(value)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a component not a directory, a loop, a path too long
        raise argparse.ArgumentTypeError(f"{value}: {exc.strerror}") from exc


def existing_dir(value: str) -> str:
    """A directory that exists and can be read."""
    st = _stat(value)
    if st is None:
        raise argparse.ArgumentTypeError(f"{value}: no such directory")
    if not stat.S_ISDIR(st.st_mode):
        raise argparse.ArgumentTypeError(f"{value}: not a directory")
    if not os.access(value, os.R_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{value}: permission denied")
    return value


def readable_file(value: str) -> str:
    """A file that exists and can be read (a pipe too: ``<(…)`` and ``/dev/stdin`` work)."""
    st = _stat(value)
    if st is None:
        raise argparse.ArgumentTypeError(f"{value}: no such file")
    if stat.S_ISDIR(st.st_mode):
        raise argparse.ArgumentTypeError(f"{value}: is a directory, not a file")
    if not os.access(value, os.R_OK):
        raise argparse.ArgumentTypeError(f"{value}: permission denied")
    return value


def fresh_dir(value: str) -> str:
    """A directory to create, or an empty one."""
    st = _stat(value)
    if st is None:
        return value
    if not stat.S_ISDIR(st.st_mode):
        raise argparse.ArgumentTypeError(f"{value}: exists and is not a directory")
    try:
        with os.scandir(value) as entries:
            empty = next(entries, None) is None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{value}: {exc.strerror}") from exc
    if not empty:
        raise argparse.ArgumentTypeError(f"{value}: exists and is not empty")
    return value


def _database_fault(value: str) -> str | None:
    """Why the existing file ``value`` is not an honestyd database (None: it is, or it is empty and may become one)."""
    with open(value, "rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if not head:
        return None
    if head != _SQLITE_MAGIC:
        return "not a database (not an SQLite file)"
    from daemon.store import table_names  # here: the store (and sqlite-utils) only for a command given a --db

    tables = table_names(os.path.abspath(value))
    if tables and "migrations" not in tables:  # None: SQLite could not tell, and the command's own reading decides
        return "an SQLite database, but not honestyd's"
    return None


def existing_db(value: str) -> str:
    """An honestyd database that exists (commands that only read it never create one)."""
    st = _stat(value)
    if st is None:
        raise argparse.ArgumentTypeError(f"{value}: no such file")
    if not stat.S_ISREG(st.st_mode):
        raise argparse.ArgumentTypeError(f"{value}: not a regular file")
    if not os.access(value, os.R_OK):
        raise argparse.ArgumentTypeError(f"{value}: permission denied")
    fault = "empty file, not an honestyd database" if st.st_size == 0 else _database_fault(value)
    if fault:
        raise argparse.ArgumentTypeError(f"{value}: {fault}")
    return value


def database(value: str) -> str:
    """An honestyd database, or a path where one may be created: its directory must exist."""
    st = _stat(value)
    if st is None:
        parent = os.path.dirname(value) or "."
        try:
            existing_dir(parent)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{value}: its directory {exc}") from exc
        if not os.access(parent, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{value}: cannot create it in {parent}: permission denied")
        return value
    if not stat.S_ISREG(st.st_mode):
        raise argparse.ArgumentTypeError(f"{value}: not a regular file")
    if not os.access(value, os.R_OK | os.W_OK):
        raise argparse.ArgumentTypeError(f"{value}: permission denied")
    fault = _database_fault(value)
    if fault:
        raise argparse.ArgumentTypeError(f"{value}: {fault}")
    return value


def check(what: str, validate: Callable[[str], str], value: Path | str) -> Path:
    """``validate(value)`` outside argparse (a path from the config): a UsageError naming ``what``."""
    try:
        validate(str(value))
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{what}: {exc}") from exc
    return Path(value)


# --- running a command


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[argparse.ArgumentParser, str | None]]:
    """Every parser below ``parser``, with the help line it is listed under."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield sub, helps.get(name)
                yield from _subparsers(sub)


def finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give every sub-command its name for error lines, and its help line as its description."""
    for sub, help_line in _subparsers(parser):
        sub.set_defaults(_prog=sub.prog)
        if sub.description is None and help_line:
            sub.description = help_line[0].upper() + help_line[1:] + "."
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again (the Python docs' recipe)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run the command, turning a mistake, Ctrl-C or a closed pipe into one line or none."""
    args = parser.parse_args(argv)
    prog = getattr(args, "_prog", parser.prog)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return CLOSED_PIPE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except UsageError as exc:
        for line in str(exc).splitlines():
            print(f"{prog}: error: {line}", file=sys.stderr)
        return USAGE
    except OSError as exc:  # what the checks could not see coming (a file gone since, a full disk): one line too
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{prog}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return USAGE if isinstance(exc, _MISTAKES) else 1
    except sqlite3.Error as exc:  # a database locked, damaged or full: the machine's trouble, not a usage error
        print(f"{prog}: error: database: {exc}", file=sys.stderr)
        return 1
