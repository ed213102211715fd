"""The daemon's published state: an immutable snapshot that sinks (metrics, API, changelog) read.

The scheduler builds a new :class:`Snapshot` after each evaluation and swaps it in with one
reference assignment, so a scrape or an HTTP request never sees a half-built state and never
touches SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from collectors.records import EvalReport
from daemon import __version__
from daemon.config import Config
from daemon.limits import Exported, select
from scorers.context import Context, Records
from scorers.progress import LabelTally, tally
from scorers.score import WindowResult, evaluate_window


@dataclass(frozen=True)
class Counters:
    """Cumulative process counters (they restart at 0 with the process, as Prometheus expects)."""

    ingest_records: Mapping[str, int] = field(default_factory=Counter)
    ingest_rejects: Mapping[tuple[str, str], int] = field(default_factory=Counter)
    checks: Mapping[str, int] = field(default_factory=Counter)
    check_failures: Mapping[str, int] = field(default_factory=Counter)
    scheduler_missed: Mapping[str, int] = field(default_factory=Counter)
    store_full: int = 0  # writes the store refused with SQLITE_FULL (ingest pauses; nothing is lost)
    unreadable_files: int | None = None  # files and folders under the root that cannot be read, now (daemon only)
    lost_lines: int = 0  # lines of rotated logs never read, counted in the rotated files (daemon/skips.py)
    lost_bytes: int = 0  # bytes of log generations the poll saw, gone before a pass read them


@dataclass(frozen=True)
class ReviewCounts:
    """The review queue as /metrics shows it (daemon/reviews/queue.py): counted when the snapshot is published."""

    #: Open reviews by agent, for every agent with a review listed (0 once its reviews are all closed).
    open: Mapping[str, int] = field(default_factory=dict)
    #: Seconds the oldest open review has been open (since it last opened); 0 when none is open.
    oldest_open_age: float = 0.0
    #: ``[alerts] review_stale`` in seconds.
    stale_after: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    """Everything the sinks show: the scores of every window at ``at`` and the counters."""

    at: datetime
    config: Config
    windows: Mapping[str, WindowResult]
    counters: Counters = field(default_factory=Counters)
    evals: tuple[EvalReport, ...] = ()
    version: str = __version__
    #: (records held, ids let go) by the daemon's scoring model; None outside the daemon.
    model: tuple[int, int] | None = None
    #: The agents with per-agent series (daemon/limits.py), chosen once per evaluation; by default every agent.
    exported: Exported = field(default_factory=Exported)
    #: Labels whose decision id no stored record carries (honesty_labels_unmatched); None outside the daemon.
    labels_unmatched: int | None = None
    #: The review queue's counts (honesty_reviews_open and the rest); None outside the daemon.
    reviews: ReviewCounts | None = None
    #: Per agent, the current labels on its decisions (honesty_labels, the pages' label progress).
    labels: Mapping[str, LabelTally] = field(default_factory=dict)


def build_snapshot(
    records: Records, at: datetime, config: Config, counters: Counters, evals: tuple[EvalReport, ...] = ()
) -> Snapshot:
    """Evaluate every configured window at ``at`` over one shared context (pure; no I/O, no clock)."""
    ctx = Context(records, at, config)
    windows = {name: evaluate_window(ctx, name) for name, _ in config.scoring.windows}
    listed = {a for w in windows.values() for a in w.agents}
    exported = select(listed, config.limits, lambda agents: {a: ctx.by_agent[a][-1].ts for a in agents
                                                             if ctx.by_agent.get(a)})
    labelled = [(d.agent, ctx.labels[d.id]) for d in ctx.decisions if d.id in ctx.labels]
    return Snapshot(at=at, config=config, windows=windows, counters=counters, evals=evals, version=__version__,
                    exported=exported, labels=tally(labelled))
