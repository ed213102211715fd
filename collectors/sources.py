"""Which source a file under the state root belongs to: one routing by glob, for batch reads and the daemon's ingest.

A path belongs to the first source whose glob matches it, tried in the order of :data:`SOURCES`.
"""

from __future__ import annotations

from typing import Protocol

from collectors.statedir import glob_match

#: The sources, in the order their globs are tried.
SOURCES = ("heartbeats", "labels", "briefs", "findings", "evals")
#: The JSON Lines sources: tailed by cursor; an append to one is not a modification (spec 1.4, v2.3).
LOGS = ("heartbeats", "labels")


class Globs(Protocol):
    """Where each source lives under the state root (the ``[globs]`` section of the config)."""

    @property
    def heartbeats(self) -> str: ...
    @property
    def labels(self) -> str: ...
    @property
    def briefs(self) -> str: ...
    @property
    def findings(self) -> str: ...
    @property
    def evals(self) -> str: ...


def source_of(globs: Globs, rel: str) -> str | None:
    """The source the relative path ``rel`` belongs to (one of :data:`SOURCES`), or None."""
    for name in SOURCES:
        if glob_match(getattr(globs, name), rel):
            return name
    return None
