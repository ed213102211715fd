"""Small builders for pure scorer tests: events, labels, files and checks from short arguments."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from collectors.citations import extract
from collectors.records import CheckResult, Event, FileEntry, Label
from collectors.reviews import ReviewEvent, parse_review_event
from daemon.changelog import Entry
from daemon.config import Config, GitHub
from daemon.reviews.events import closing, encode, failed_rows, openings
from daemon.reviews.queue import Queue
from daemon.reviews.rule import due, firing
from daemon.reviews.views import changelog_entries
from daemon.snapshot import Snapshot
from scorers.context import Context, Records
from scorers.outcome import Outcome
from scorers.score import RULES, WindowResult, evaluate

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def t(minutes: float = 0, *, hours: float = 0, days: float = 0) -> datetime:
    """T0 shifted by the given offsets (negative = earlier)."""
    return T0 + timedelta(minutes=minutes, hours=hours, days=days)


_line = iter(range(1, 10**9))


def ev(
    id: str, ts: datetime, *, agent: str = "ada", kind: str = "dm", text: str = "", cites: tuple[str, ...] = (),
    path: str = "heartbeats/a.jsonl", line: int | None = None, repo: str = "acme/app", markdown: bool = False,
    **fields: Any,
) -> Event:
    """A heartbeat event, or a Markdown decision (``markdown``: no line); citations extracted as the parser does."""
    return Event(
        id=id, ts=ts, agent=agent, kind=kind, path=path,
        line=None if markdown else line if line is not None else next(_line),
        text=text, citations=extract(text, cites, repo), **fields,
    )


def label(decision: str, ts: datetime, value: str = "down", reviewer: str = "andrew", line: int | None = None) -> Label:
    """A reviewer label."""
    return Label(ts, decision, value, reviewer, "labels/r.jsonl", line if line is not None else next(_line))


def file(path: str, created: datetime, *modified: datetime, deleted: datetime | None = None) -> FileEntry:
    """A file-index entry."""
    return FileEntry(path, created, tuple(modified), deleted)


def check(target: str, type: str, at: datetime, ok: bool | None, seq: int = 0) -> CheckResult:
    """A link-check result."""
    return CheckResult(target, type, at, ok, 200 if ok else 404, seq)


def records(*events: Event, labels: tuple[Label, ...] = (), files: tuple[FileEntry, ...] = (),
            checks: tuple[CheckResult, ...] = ()) -> Records:
    """Scorer records from parts."""
    return Records(list(events), list(labels), {f.path: f for f in files}, list(checks))


def outcome(component: str, d: Event, recs: Records, at: datetime, window: timedelta = DAY,
            config: Config | None = None) -> Outcome:
    """One component's outcome for one decision."""
    ctx = Context(recs, at, config or Config(github=GitHub(repo="acme/app")))
    found = next(x for x in ctx.decisions if x.id == d.id)
    return RULES[component](found, ctx, window)


def score(recs: Records, at: datetime, window: str = "24h", config: Config | None = None) -> WindowResult:
    """The window result."""
    return evaluate(recs, at, window, config or Config(github=GitHub(repo="acme/app")))


def opened_reviews(snapshot: Snapshot, close: tuple[str, str] | None = None) -> Queue:
    """The queue of the reviews the opening rule opens at ``snapshot`` on an empty queue (a first start), with the
    evidence from the snapshot's audit rows, the events read back as the daemon reads them; ``close``: (reviewer,
    note) closing the first of them."""
    todo = due(firing(snapshot), Queue(), None)
    audited = {c.key: snapshot.windows[c.window].agents.get(c.agent) for c in todo}
    failing = {key: None if a is None else failed_rows(a) for key, a in audited.items()}
    written = openings(todo, Queue(), snapshot.at, failing, at_start=True)
    if close is not None and written:
        written.append(closing(written[0]["review"], snapshot.at, *close))
    lines = [encode(e)[0] for e in written]
    events = [parse_review_event(raw[:-1], "reviews/honestyd.jsonl", n) for n, raw in enumerate(lines, 1)]
    return Queue.fold(e for e in events if isinstance(e, ReviewEvent))


def review_entries(snapshot: Snapshot) -> list[Entry]:
    """The changelog entries of the reviews the opening rule opens at ``snapshot`` on an empty queue (a first start),
    the events written as lines and read back as the daemon reads them."""
    return list(changelog_entries(opened_reviews(snapshot)))


def store_as_of(db: Path, last: str) -> sqlite3.Connection:
    """A database at ``db`` as the version whose last migration was ``last`` left it, in an open transaction (commit
    it once the test's old rows are in)."""
    from daemon.store import MIGRATIONS

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    conn.execute("BEGIN")
    names = [name for name, _ in MIGRATIONS]
    for name, migration in MIGRATIONS[:names.index(last) + 1]:
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    return conn
