"""Running checks: pick targets (all, or the day's sample), skip cached ones, dispatch by type, store results.

Checkers are looked up by citation type in one map (url, path, run, issue), so each kind of
source has one implementation and the runner stays the same for all of them.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Protocol

from collectors.links import LinkMap, Links
from collectors.records import CheckResult, FileEntry
from daemon.config import Config
from daemon.store import Store
from daemon.verify.outcome import CheckOutcome
from daemon.verify.paths import check_path
from daemon.verify.sampler import daily_sample

_RUN = re.compile(r"run:([0-9]+)")
_ISSUE = re.compile(r"([^/#\s]+/[^/#\s]+)#([0-9]+)")


class UrlCheck(Protocol):
    """What the runner needs of a URL checker."""

    async def check(self, url: str) -> CheckOutcome: ...


class ApiCheck(Protocol):
    """What the runner needs of a CI/issue API checker."""

    async def check_run(self, repo: str, run_id: str) -> CheckOutcome: ...

    async def check_issue(self, repo: str, number: str) -> CheckOutcome: ...


Checker = Callable[[str], Awaitable[CheckOutcome]]


@dataclass
class VerifySummary:
    """What one verification pass did, by citation type."""

    checked: Counter[str] = field(default_factory=Counter)
    resolved: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    inconclusive: Counter[str] = field(default_factory=Counter)
    cached: Counter[str] = field(default_factory=Counter)
    results: list[CheckResult] = field(default_factory=list)

    def as_dict(self) -> dict[str, dict[str, int]]:
        """Per-type counts, for ``--json`` and logs."""
        kinds = sorted(set(self.checked) | set(self.cached))
        return {
            k: {"checked": self.checked[k], "resolved": self.resolved[k], "failed": self.failed[k],
                "inconclusive": self.inconclusive[k], "cached": self.cached[k]}
            for k in kinds
        }


def checkers(
    root: Path, files: Mapping[str, FileEntry], links: Links, at: datetime, default_repo: str, urls: UrlCheck,
    api: ApiCheck,
) -> dict[str, Checker]:
    """The name → implementation map of checkers, one per citation type (paths: ``files`` by canonical path, and the
    symlinks inside the root)."""
    link_map = LinkMap(links)

    async def path(target: str) -> CheckOutcome:
        return check_path(root, target, files, link_map, at)

    async def run(target: str) -> CheckOutcome:
        m = _RUN.fullmatch(target)
        if m is None or not default_repo:
            return CheckOutcome(None, None, "no [github] repo configured for run numbers")
        return await api.check_run(default_repo, m.group(1))

    async def issue(target: str) -> CheckOutcome:
        m = _ISSUE.fullmatch(target)
        if m is None:
            return CheckOutcome(None, None, "issue without a repository")
        return await api.check_issue(m.group(1), m.group(2))

    return {"url": urls.check, "path": path, "run": run, "issue": issue}


def select_targets(
    store: Store, config: Config, now: datetime, sample_day: date | None
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(to check, skipped because a conclusive result is fresh): everything, or the day's sample."""
    targets = store.citation_targets()
    if sample_day is not None:
        targets = daily_sample(targets, sample_day, config.verify.rates)
    fresh = store.recently_checked(now - config.verify.recheck_after)
    return [t for t in targets if t not in fresh], [t for t in targets if t in fresh]


async def verify(
    targets: list[tuple[str, str]], check_by_type: Mapping[str, Checker], now: Callable[[], datetime]
) -> VerifySummary:
    """Check every target concurrently (the checkers enforce their own limits); the caller stores the results."""
    summary = VerifySummary()

    async def one(kind: str, target: str) -> CheckResult:
        try:
            outcome = await check_by_type[kind](target)
        except Exception as exc:
            outcome = CheckOutcome(None, None, f"checker error: {type(exc).__name__}: {exc}")
        return CheckResult(target, kind, now(), outcome.ok, outcome.status, detail=outcome.detail)

    results = await asyncio.gather(*(one(kind, target) for kind, target in targets))
    for r in results:
        summary.checked[r.type] += 1
        counter = summary.inconclusive if r.ok is None else summary.resolved if r.ok else summary.failed
        counter[r.type] += 1
    summary.results = list(results)
    return summary
