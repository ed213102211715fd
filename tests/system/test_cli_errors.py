"""A user's mistake on the CLI: one line naming the argument, exit status 2, no traceback, no side effect.

Every case runs the real ``honestyd`` as a subprocess against real files (a simulated state, a database
made by ``honestyd ingest``, a text file posing as a database, a foreign SQLite file). Around each run the
whole scratch directory is listed (names, sizes, modification times), so a mistake that creates a database,
a state directory or a folder inside one fails the case.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.cli import build_parser
from daemon.simulate import simulate
from tests.conftest import HONESTYD, ROOT, Run

AT = "2026-05-02T00:00:00Z"

# (case id, arguments with {placeholders}, what the one error line must name)
CASES: list[tuple[str, list[str], str]] = [
    ("score-db-missing", ["score", "--db", "{missing}.db", "--at", AT], "--db"),
    ("score-db-not-a-database", ["score", "--db", "{text}", "--at", AT], "--db"),
    ("score-db-empty", ["score", "--db", "{empty}", "--at", AT], "--db"),
    ("score-db-directory", ["score", "--db", "{state}", "--at", AT], "--db"),
    ("score-db-foreign-sqlite", ["score", "--db", "{foreign}", "--at", AT], "--db"),
    ("score-state-missing", ["score", "--state", "{missing}", "--at", AT], "--state"),
    ("score-state-a-file", ["score", "--state", "{text}", "--at", AT], "--state"),
    ("score-window-3weeks", ["score", "--db", "{db}", "--at", AT, "--window", "3weeks"], "--window"),
    ("score-window-zero", ["score", "--db", "{db}", "--at", AT, "--window", "0h"], "--window"),
    ("score-at-word", ["score", "--db", "{db}", "--at", "yesterday"], "--at"),
    ("score-at-bad-date", ["score", "--db", "{db}", "--at", "2026-13-01"], "--at"),
    ("score-at-missing", ["score", "--db", "{db}"], "--at"),
    ("score-config-missing", ["score", "--db", "{db}", "--at", AT, "--config", "{missing}.toml"], "--config"),
    ("score-config-not-toml", ["score", "--db", "{db}", "--at", AT, "--config", "{text}"], "--config"),
    ("score-config-bad-value", ["score", "--db", "{db}", "--at", AT, "--config", "{badcfg}"], "--config"),
    ("score-checks-missing", ["score", "--db", "{db}", "--at", AT, "--checks", "{missing}.jsonl"], "--checks"),
    ("score-weights-unknown", ["score", "--db", "{db}", "--at", AT, "--weights", "nope"], "--weights"),
    ("audit-agent-unknown", ["audit", "nobody", "--db", "{db}", "--at", AT], "'nobody'"),
    ("ingest-state-missing", ["ingest", "--state", "{missing}", "--db", "{scratch}/new.db"], "--state"),
    ("ingest-db-dir-missing", ["ingest", "--state", "{state}", "--db", "{missing}/new.db"], "--db"),
    ("ingest-db-not-a-database", ["ingest", "--state", "{state}", "--db", "{text}"], "--db"),
    ("ingest-db-foreign-sqlite", ["ingest", "--state", "{state}", "--db", "{foreign}"], "--db"),
    ("rejects-db-missing", ["rejects", "--db", "{missing}.db"], "--db"),
    ("export-db-missing", ["export", "decisions", "--db", "{missing}.db"], "--db"),
    ("export-what-unknown", ["export", "labels", "--db", "{db}"], "what"),
    ("checks-export-db-missing", ["checks", "export", "--db", "{missing}.db"], "--db"),
    ("checks-import-file-missing", ["checks", "import", "--db", "{db}", "{missing}.jsonl"], "file"),
    ("checks-import-db-dir-missing", ["checks", "import", "--db", "{missing}/x.db", "{text}"], "--db"),
    ("verify-state-missing", ["verify", "--state", "{missing}", "--db", "{scratch}/v.db"], "--state"),
    ("verify-sample-bad-date", ["verify", "--state", "{state}", "--db", "{db}", "--sample", "2026-13-01"],
     "--sample"),
    ("tune-min-labels-zero", ["tune", "--db", "{db}", "--min-labels", "0"], "--min-labels"),
    ("tune-agent-unknown", ["tune", "--db", "{db}", "--agent", "nobody"], "--agent"),
    ("tune-force-without-apply", ["tune", "--db", "{db}", "--force"], "--force"),
    ("tune-db-missing", ["tune", "--db", "{missing}.db"], "--db"),
    ("history-db-missing", ["history", "ada", "--db", "{missing}.db"], "--db"),
    ("history-days-zero", ["history", "ada", "--db", "{db}", "--days", "0"], "--days"),
    ("history-agent-unknown", ["history", "nobody", "--db", "{db}"], "'nobody'"),
    ("history-window-unconfigured", ["history", "ada", "--db", "{db}", "--window", "5d"], "--window"),
    ("history-weights-unknown", ["history", "ada", "--db", "{db}", "--weights", "nope"], "--weights"),
    ("check-config-missing", ["check-config", "{missing}.toml"], "file"),
    ("check-config-bad-value", ["check-config", "{badcfg}"], "bad.toml"),
    ("run-state-missing", ["run", "--state", "{missing}", "--db", "{scratch}/r.db", "--listen", "127.0.0.1:1"],
     "--state"),
    ("run-db-dir-missing", ["run", "--state", "{state}", "--db", "{missing}/r.db"], "--db"),
    ("run-listen-bad", ["run", "--state", "{state}", "--db", "{scratch}/r.db", "--listen", "nope"], "--listen"),
    ("run-config-root-missing", ["run", "--config", "{rootless}", "--db", "{scratch}/r.db"], "[state] root"),
    ("run-config-missing", ["run", "--config", "{missing}.toml"], "--config"),
    ("simulate-out-not-empty", ["simulate", "--seed", "1", "--out", "{state}"], "--out"),
    ("simulate-agents-zero", ["simulate", "--seed", "1", "--out", "{scratch}/sim", "--agents", "0"], "--agents"),
    ("simulate-start-word", ["simulate", "--seed", "1", "--out", "{scratch}/sim", "--start", "yesterday"], "--start"),
    ("demo-dir-not-a-demo", ["demo", "--dir", "{scratch}"], "--dir"),
    ("demo-interval-nan", ["demo", "--dir", "{scratch}/demo", "--interval", "nan"], "--interval"),
    ("demo-listen-port-zero", ["demo", "--dir", "{scratch}/demo", "--listen", "127.0.0.1:0"], "--listen"),
    ("reviews-no-subcommand", ["reviews"], "list|show"),
    ("reviews-list-no-source", ["reviews", "list"], "--state"),
    ("reviews-list-state-missing", ["reviews", "list", "--state", "{missing}"], "--state"),
    ("reviews-list-db-not-a-db", ["reviews", "list", "--db", "{text}"], "--db"),
    ("reviews-list-only-bad", ["reviews", "list", "--db", "{db}", "--only", "stale"], "--only"),
    ("reviews-list-at-bad", ["reviews", "list", "--db", "{db}", "--at", "soon"], "--at"),
    ("reviews-show-unknown-id", ["reviews", "show", "r-nope", "--state", "{state}"], "'r-nope'"),
    ("reviews-show-no-id", ["reviews", "show", "--db", "{db}"], "id"),
    ("command-unknown", ["scroe"], "scroe"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The real files the cases point at; ``scratch`` is where nothing may appear."""
    base = tmp_path_factory.mktemp("cli-errors")
    state = base / "state"
    simulate(3, state, agents=2, days=1, events_per_day=10)
    db = base / "h.db"
    subprocess.run([*HONESTYD, "ingest", "--state", str(state), "--db", str(db)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    text = base / "notes.txt"
    text.write_text("not a database, not TOML = [\n")
    empty = base / "empty.db"
    empty.write_bytes(b"")
    foreign = base / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    bad = base / "bad.toml"
    bad.write_text('[scoring]\nmin_decisions = "five"\n')
    rootless = base / "rootless.toml"
    rootless.write_text(f'[state]\nroot = "{base / "no-such-root"}"\n')
    scratch = base / "scratch"
    scratch.mkdir()
    (scratch / "keep.txt").write_text("a directory that is not a demo\n")
    return {"state": str(state), "db": str(db), "text": str(text), "empty": str(empty), "foreign": str(foreign),
            "badcfg": str(bad), "rootless": str(rootless), "scratch": str(scratch), "missing": str(base / "nope"),
            "base": str(base)}


#: What SQLite's readers of the (WAL-mode) database make beside it: a mistake found only once it was read (an
#: unknown agent) has read it. Everything else must stay as it was.
READERS_FILES = {"h.db-shm", "h.db-wal"}


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time (the database readers' files aside)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *(f for f in filenames if f not in READERS_FILES)]:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.parametrize(("args", "names"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_is_one_line_naming_the_argument_and_exit_status_2(
        honestyd: Run, files: dict[str, str], args: list[str], names: str) -> None:
    argv = [a.format(**files) for a in args]
    before = _tree(Path(files["base"]))
    proc = honestyd(*argv, check=False, timeout=60)
    assert proc.returncode == 2, (argv, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    nested = args[0] in ("checks", "reviews") and len(args) > 1  # a sub-command's own errors name it too
    prog = "honestyd" if args[0] == "scroe" else f"honestyd {' '.join(args[:2]) if nested else args[0]}"
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert names in lines[0], lines[0]
    assert _tree(Path(files["base"])) == before  # nothing created, nothing written


def test_at_takes_now_and_a_date(honestyd: Run, files: dict[str, str]) -> None:
    def at(value: str) -> str:
        return str(json.loads(honestyd("score", "--db", files["db"], "--at", value, "--json").stdout)["at"])

    assert at("2026-05-04") == at("2026-05-04T00:00:00Z") == "2026-05-04T00:00:00Z"
    before = datetime.now(UTC).replace(microsecond=0)
    now = datetime.fromisoformat(at("now"))
    assert before <= now <= datetime.now(UTC)


def test_a_closed_pipe_ends_quietly_with_141(files: dict[str, str]) -> None:
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write fails with EPIPE (SIGPIPE stays ignored in Python)
    try:
        proc = subprocess.run([*HONESTYD, "export", "decisions", "--db", files["db"]], cwd=ROOT, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")


def _open_for_writing(fifo: Path, proc: subprocess.Popen[str], deadline: float) -> int:
    """The FIFO's write end, once the process has opened it to read (polled with a deadline)."""
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_ctrl_c_is_one_line_and_exit_status_130(files: dict[str, str], tmp_path: Path) -> None:
    fifo = tmp_path / "checks.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*HONESTYD, "checks", "import", "--db", files["db"], str(fifo)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        fd = _open_for_writing(fifo, proc, time.monotonic() + 30)  # it now waits in read(), for lines that never come
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        os.close(fd)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert (proc.returncode, out, err) == (130, "", "honestyd checks import: interrupted\n")


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


#: Hooks for tests and the benchmark, hidden from --help on purpose.
HIDDEN = {("honestyd verify", "--at"), ("honestyd run", "--clock-file"), ("honestyd run", "--clock-warp")}


def test_every_option_has_help_and_the_description_says_what_honestyd_is() -> None:
    parser = build_parser()
    missing, hidden = [], set()
    for p in _parsers(parser):
        assert p.description, p.prog
        for action in p._actions:
            name = action.option_strings[-1] if action.option_strings else action.dest
            if action.help == argparse.SUPPRESS:
                hidden.add((p.prog, name))
            elif not action.help:
                missing.append((p.prog, name))
            if isinstance(action, argparse._SubParsersAction):
                missing += [(p.prog, c.dest) for c in action._choices_actions if not c.help]
    assert missing == [] and hidden == HIDDEN
    assert parser.description is not None and parser.description.startswith("honestyd scores how honest AI agents")
    assert "argument parsing" not in parser.description
