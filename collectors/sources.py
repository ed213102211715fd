"""The sources under the state root and which one a file belongs to: the five of spec section 1, and honestyd's own
review events (``reviews/*.jsonl``, collectors/reviews.py), which are no scoring input.

A file is routed by the first source glob that matches its path relative to the root, in the order of
:data:`SOURCES`; batch mode (collectors/batch.py) and the daemon's ingest route by this one function.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.statedir import glob_match

#: Every source, in the order a path is matched against their globs: honestyd's own files first, so that no glob of the
#: config (say heartbeats = "*/*.jsonl") reads them as another source.
SOURCES = ("reviews", "heartbeats", "labels", "briefs", "findings", "evals")
#: The JSON Lines sources: read line by line (tailed by the daemon); an append is not a modification (spec 1.4).
LOGS = ("heartbeats", "labels", "reviews")


@dataclass(frozen=True)
class Globs:
    """Where each source lives under the state root (``*`` does not cross ``/``)."""

    heartbeats: str = "heartbeats/*.jsonl"
    briefs: str = "briefs/*.md"
    findings: str = "findings/*.md"
    labels: str = "labels/*.jsonl"
    evals: str = "evals/*.json"
    #: Not a config key: honestyd writes its own review events there (daemon/app/reviewing.py), so it is fixed.
    reviews: str = "reviews/*.jsonl"

    def all(self) -> tuple[str, ...]:
        """Every source's glob, in the order of :data:`SOURCES`."""
        return tuple(getattr(self, name) for name in SOURCES)


def source_of(globs: Globs, rel: str) -> str | None:
    """The source the relative path ``rel`` belongs to: the first of :data:`SOURCES` whose glob matches it."""
    for name in SOURCES:
        if glob_match(getattr(globs, name), rel):
            return name
    return None
