"""One verification pass, the same for ``honestyd verify`` and the daemon's daily job: select the targets (all, or a
day's sample; those with a fresh conclusive result are skipped and counted as cached), check them with the
checker of each citation type, store the results.

The store is reached only through ``access``, which runs a function of the store: directly for the CLI (which
holds the store's lock file), on the store writer's thread under the store lock for the daemon.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from datetime import date, datetime
from pathlib import Path
from typing import Protocol, TypeVar

from collectors.links import Links
from collectors.records import CheckResult, FileEntry
from daemon.config import Config
from daemon.store import Store
from daemon.verify.github import GitHubChecker, load_token
from daemon.verify.http import UrlChecker
from daemon.verify.runner import VerifySummary, checkers, select_targets, verify

T = TypeVar("T")

Targets = list[tuple[str, str]]


class StoreAccess(Protocol):
    """Runs ``fn`` (which reads or writes the store) where the caller's store may be used, and returns its result."""

    async def __call__(self, fn: Callable[[], T]) -> T: ...


async def direct(fn: Callable[[], T]) -> T:
    """``fn()`` here and now: for a caller that is the store's only user."""
    return fn()


async def verify_once(
    store: Store, config: Config, root: Path, now: datetime, clock: Callable[[], datetime], *,
    sample_day: date | None, environ: Mapping[str, str] = os.environ, access: StoreAccess = direct,
) -> VerifySummary:
    """Check the targets of ``sample_day``'s sample (None: every target) as of ``now``, path citations in ``root``;
    the results (stamped by ``clock``) are stored, and the summary counts them, and the fresh ones skipped, by type.
    """
    todo, cached, files, links = await access(functools.partial(_targets, store, config, now, sample_day))
    async with UrlChecker(config.verify) as urls, \
            GitHubChecker(config.verify, config.github, load_token(config.github, environ)) as api:
        by_type = checkers(root, files, links, now, config.github_repo, urls, api)
        summary = await verify(todo, by_type, clock)
    await access(functools.partial(_store_checks, store, summary.results))
    for kind, _ in cached:
        summary.cached[kind] += 1
    return summary


def _targets(store: Store, config: Config, now: datetime, sample_day: date | None
             ) -> tuple[Targets, Targets, Mapping[str, FileEntry], Links]:
    """(to check, fresh), and what the path checker reads: the file index and the symlinks."""
    todo, cached = select_targets(store, config, now, sample_day)
    return todo, cached, store.file_entries(), store.links()


def _store_checks(store: Store, results: list[CheckResult]) -> None:
    with store.transaction():
        store.add_checks(results)
