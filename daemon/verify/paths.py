"""Path checks: a cited path resolves iff it stays inside the root and the file index says the file it names exists
(through the symlinks inside the root, as the index knows them: spec 1, v2.3)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from collectors.citations import path_never_exists
from collectors.links import LinkMap
from collectors.records import FileEntry
from collectors.statedir import inside
from daemon.verify.outcome import CheckOutcome


def check_path(root: Path, target: str, files: Mapping[str, FileEntry], links: LinkMap,
               at: datetime) -> CheckOutcome:
    """Resolve ``..`` and symlinks under ``root``; outside the root or absent from the index at ``at`` → False.

    ``files`` is the index by canonical path and ``links`` the symlinks it was built with: the target's entry is the
    one of the file it names.
    """
    if path_never_exists(target):
        return CheckOutcome(False, None, "outside the state root")
    root_real = os.path.realpath(root)
    canonical = links.resolve(target)
    if canonical is None or not inside(root_real, os.path.join(root_real, target)):
        return CheckOutcome(False, None, "resolves outside the state root")
    entry = files.get(canonical)
    if entry is None:
        return CheckOutcome(False, None, "ghost path: never indexed")
    if not entry.exists(at):
        when = "deleted" if entry.deleted is not None and entry.deleted <= at else "not yet created"
        return CheckOutcome(False, None, f"ghost path: {when} at check time")
    return CheckOutcome(True, None, "exists")
