"""What cannot be read is said, counted and retried. Nothing is skipped silently.

* A mode-000 log and a mode-000 folder, against the real daemon as a subprocess: each logged once as a WARNING
  naming it (not again at later rescans), counted in ``honesty_unreadable_files``, and ingested at the next
  rescan once readable again (the gauge back to 0). Root reads mode-000 files, so when the suite runs as root
  the daemon runs as ``nobody`` on a tree it owns; were it able to read them, the gauge would stay at 0 and the
  test fail, not pass.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest

from collectors.rfc3339 import format_ts
from tests.daemon_harness import Running, daemon, stop, wait_for, write_config


def _line(eid: str, agent: str) -> str:
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=5))
    return json.dumps({"id": eid, "ts": ts, "agent": agent, "kind": "dm", "thread": eid, "text": "ok"}) + "\n"


# --- unreadable files and folders, against the daemon


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, str | None]]:
    """A directory the daemon's user owns, and that user: ``nobody`` when the tests run as root, else ourselves."""
    base = Path(tempfile.mkdtemp(prefix="honestyd-unreadable-"))
    os.chmod(base, 0o755)
    try:
        yield base, "nobody" if os.geteuid() == 0 else None
    finally:
        for path in [base, *base.rglob("*")]:  # mode 000 folders back to searchable, so that they can be removed
            if path.is_dir() and not path.is_symlink():
                os.chmod(path, 0o755)
        shutil.rmtree(base)


def _give(base: Path, user: str | None) -> None:
    if user is None:
        return
    account = pwd.getpwnam(user)
    for path in [base, *base.rglob("*")]:
        os.chown(path, account.pw_uid, account.pw_gid, follow_symlinks=False)


def _probe(root: Path, agent: str) -> IO[str]:
    """Rewrite ``findings/probe.md`` through a descriptor kept open: only a rescan finds it (no event)."""
    f = (root / "findings" / "probe.md").open("r+")
    f.write(f"---\nagent: {agent}\nts: {format_ts(datetime.now(UTC))}\n---\nprobe\n")
    f.flush()
    return f


def _agents(d: Running) -> set[str]:
    status, text = d.get("/v1/agents")
    return set(json.loads(text)["agents"]) if status == 200 else set()


def _warnings(d: Running, what: str) -> int:
    return sum(1 for line in d.logs().splitlines() if " WARNING " in line and f"{what}: cannot be read" in line)


def test_an_unreadable_log_and_folder_are_logged_once_counted_and_read_once_readable(
        unprivileged: tuple[Path, str | None]) -> None:
    base, user = unprivileged
    root = base / "state"
    for folder in ("heartbeats", "briefs", "findings"):
        (root / folder).mkdir(parents=True)
    (root / "heartbeats" / "ada.jsonl").write_text("".join(_line(f"ada-{i}", "ada") for i in range(3)))
    locked_log = root / "heartbeats" / "bob.jsonl"
    locked_log.write_text("".join(_line(f"bob-{i}", "bob") for i in range(2)))
    (root / "briefs" / "carol-1.md").write_text(f"---\nagent: carol\nts: {format_ts(datetime.now(UTC))}\n---\nhi\n")
    (root / "findings" / "probe.md").write_text("")
    config = write_config(base / "config.toml")
    _give(base, user)
    locked_log.chmod(0o000)
    (root / "briefs").chmod(0o000)
    held: list[IO[str]] = []
    try:
        with daemon(base, root, config=config, user=user) as d:
            wait_for(lambda: d.metric("honesty_unreadable_files") == 2, 15, "both counted")
            for agent in ("zed", "yan"):  # two rescans more: still unreadable, not logged again
                held.append(_probe(root, agent))
                wait_for(lambda a=agent: a in _agents(d), 15, f"a rescan finding {agent}")  # type: ignore[misc]
            assert (_warnings(d, "heartbeats/bob.jsonl"), _warnings(d, "briefs")) == (1, 1), d.logs()
            assert "Permission denied" in d.logs()
            assert d.metric("honesty_unreadable_files") == 2
            assert d.metric("honesty_ingest_records_total", source="heartbeats") == 3
            assert not {"bob", "carol"} & _agents(d)
            locked_log.chmod(0o644)
            (root / "briefs").chmod(0o755)
            # No event tells of a chmod: the next rescan reads them.
            wait_for(lambda: {"bob", "carol"} <= _agents(d), 15, "both read at the next rescan")
            wait_for(lambda: d.metric("honesty_unreadable_files") == 0, 15, "the gauge back to 0")
            assert d.metric("honesty_ingest_records_total", source="heartbeats") == 5
            assert "heartbeats/bob.jsonl: readable again" in d.logs()
            code, _ = stop(d)
            assert code == 0, d.logs()
    finally:
        for f in held:
            f.close()


def test_a_folder_that_becomes_unreadable_keeps_its_decisions(unprivileged: tuple[Path, str | None]) -> None:
    """A folder that cannot be listed any more is not a folder whose files were deleted: its briefs keep their
    decisions (before, the next rescan removed them, as for deleted files, and read them again as new ones)."""
    base, user = unprivileged
    root = base / "state"
    for folder in ("heartbeats", "briefs", "findings"):
        (root / folder).mkdir(parents=True)
    (root / "briefs" / "carol-1.md").write_text(f"---\nagent: carol\nts: {format_ts(datetime.now(UTC))}\n---\nhi\n")
    (root / "findings" / "probe.md").write_text("")
    config = write_config(base / "config.toml")
    _give(base, user)
    held: list[IO[str]] = []
    try:
        with daemon(base, root, config=config, user=user) as d:
            wait_for(lambda: "carol" in _agents(d), 15, "the brief read")
            assert d.metric("honesty_unreadable_files") == 0
            (root / "briefs").chmod(0o000)
            for agent in ("zed", "yan"):
                held.append(_probe(root, agent))
                wait_for(lambda a=agent: a in _agents(d), 15, f"a rescan finding {agent}")  # type: ignore[misc]
            assert d.metric("honesty_unreadable_files") == 1 and _warnings(d, "briefs") == 1
            assert "carol" in _agents(d) and not re.search(r"[1-9][0-9]* deletions", d.logs()), d.logs()
            code, _ = stop(d)
            assert code == 0, d.logs()
    finally:
        for f in held:
            f.close()
