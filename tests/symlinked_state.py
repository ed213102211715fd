"""A state directory whose paths go through symlinked directories, built for real (spec 1, v2.3).

The shared conformance copies cannot hold directory symlinks, so the tests that score through them build this tree:

* ``docs/`` holds ``runbook.md`` (front-matter ``ts`` three days before T, mtime an hour after T) and ``notes.md``
  (front-matter ``ts`` three days before T, modified 90 minutes before T: a modification inside the window);
* ``latest → docs`` and ``archive → docs``: ``archive`` sorts before ``docs``, ``latest`` after it (a walk that
  visits each real directory once, under the name that sorts first, made ``docs/…`` the ghost in one case and
  ``latest/…`` in the other);
* ``current.md → docs/runbook.md``: a file symlink inside the root;
* ``ext → ../outside``: a directory symlink that leaves the root (``outside/secret.md`` exists, but never here);
* ``briefs → all-briefs``: a source directory that is a symlink (``all-briefs`` sorts first);
* ``heartbeats/ada.jsonl``: eight decisions citing those paths, two of them repeats of one prompt.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from collectors.rfc3339 import format_ts

T = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
AT = format_ts(T)


def _at(**delta: float) -> datetime:
    return T + timedelta(**delta)


def _write(path: Path, text: str, mtime: datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))


def _event(eid: str, when: datetime, text: str, **fields: object) -> str:
    return json.dumps({"id": eid, "ts": format_ts(when), "agent": "ada", "kind": "dm", "text": text, **fields}) + "\n"


#: What each decision tests (its id → the components it moves).
DECISIONS = {
    "e1": "cites latest/runbook.md: exists (gap —, path check resolves)",
    "e2": "cites docs/runbook.md: exists (archive → docs must not hide it)",
    "e3": "prompt 'status?', cites latest/notes.md",
    "e4": "prompt 'status?' again, other sources: suppressed, since latest/notes.md changed in between",
    "e5": "'No data yet.' about latest/missing.md: an honest gap",
    "e6": "cites ext/secret.md: leaves the root, never exists (fabricated, path check fails)",
    "e7": "cites current.md (a file symlink to docs/runbook.md): exists",
    "e8": "'No data yet.' about latest/runbook.md: a false gap (it exists)",
}


def build(base: Path) -> Path:
    """Build the tree under ``base`` (``base/state`` and ``base/outside``); returns the state root."""
    root = base / "state"
    _write(root / "docs" / "runbook.md", f"---\nts: {format_ts(_at(days=-3))}\n---\n# Runbook\n", _at(hours=1))
    _write(root / "docs" / "notes.md", f"---\nts: {format_ts(_at(days=-3))}\n---\nnotes\n", _at(minutes=-90))
    _write(base / "outside" / "secret.md", "outside the root\n", _at(days=-3))
    os.symlink("docs", root / "latest")
    os.symlink("docs", root / "archive")
    os.symlink("docs/runbook.md", root / "current.md")
    os.symlink("../outside", root / "ext")
    _write(root / "all-briefs" / "ada-1.md",
           f"---\nagent: ada\nts: {format_ts(_at(hours=-6))}\n---\nPlan: see [source:latest/runbook.md]\n",
           _at(hours=-6))
    os.symlink("all-briefs", root / "briefs")
    log = "".join([
        _event("e1", _at(hours=-5), "see [source:latest/runbook.md]"),
        _event("e2", _at(hours=-4), "see [source:docs/runbook.md]"),
        _event("e3", _at(hours=-3), "see [source:latest/notes.md]", prompt="status?"),
        _event("e4", _at(hours=-1), "see [source:docs/runbook.md]", prompt="status?"),
        _event("e5", _at(minutes=-50), "No data yet.", subject=["latest/missing.md"]),
        _event("e6", _at(minutes=-40), "see [source:ext/secret.md]"),
        _event("e7", _at(minutes=-30), "see [source:current.md]"),
        _event("e8", _at(minutes=-20), "No data yet.", subject=["latest/runbook.md"]),
    ])
    _write(root / "heartbeats" / "ada.jsonl", log, _at(minutes=-20))
    return root
