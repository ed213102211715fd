"""The sources under the state root and which one a file belongs to: the five of spec section 1, and honestyd's own
review events (``reviews/*.jsonl``, collectors/reviews.py), which are no scoring input.

A file is routed by the first source glob that matches its path relative to the root, in the order of
:data:`SOURCES`; batch mode (collectors/batch.py) and the daemon's ingest route by this one function.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from collectors.statedir import glob_regex

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
    found = _router(globs.all()).fullmatch(rel)
    return found.lastgroup if found is not None else None


def routes(globs: Globs, paths: Iterable[str]) -> list[str | None]:
    """:func:`source_of` of each of ``paths``, with the globs' pattern looked up once (a scan routes every file)."""
    match = _router(globs.all()).fullmatch
    return [found.lastgroup if (found := match(rel)) is not None else None for rel in paths]


@lru_cache(maxsize=16)
def _router(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for every source's glob, each its own named group, in the order of :data:`SOURCES`: a full match
    takes the first alternative that matches the whole path, so one match routes a path (a scan routes every file)."""
    return re.compile("|".join(f"(?P<{name}>{glob_regex(p).pattern})" for name, p in zip(SOURCES, patterns,
                                                                                          strict=True)))
