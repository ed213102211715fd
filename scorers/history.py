"""Score history: daily per-component counts, re-rendered under any weights version.

Counts (pass / counted / pending per component) do not depend on weights, so a day's score
under another version is just another weighted average of the same ratios: a re-tune can be
judged on past data, and old scores re-render so trend lines stay comparable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from collectors.records import DayCounts as DayCounts  # its home; imported from here too
from scorers.context import Context, Records
from scorers.score import display_percent, evaluate_window, weighted
from scorers.spec import COMPONENTS, ScoringConfig


@dataclass(frozen=True)
class HistoryPoint:
    """A day's score under one weights version."""

    day: date
    window: str
    decisions: int
    score: float | None
    percent: int | None
    coverage: float


def day_end(day: date) -> datetime:
    """The evaluation time of a day's snapshot: the next midnight (UTC)."""
    return datetime.combine(day + timedelta(days=1), time(), tzinfo=UTC)


def counts_at(
    records: Records, day: date, config: ScoringConfig, agents: Iterable[str] | None = None
) -> list[DayCounts]:
    """Every (agent, window) count at the end of ``day``."""
    ctx = Context(records, day_end(day), config)
    wanted = list(agents) if agents is not None else None
    out = []
    for name, _ in config.scoring.windows:
        result = evaluate_window(ctx, name, agents=wanted)
        for agent, a in result.agents.items():
            out.append(DayCounts(day, agent, name, a.decisions, tuple(a.components[c] for c in COMPONENTS)))
    return out


def history_points(counts: Sequence[DayCounts], weights: tuple[float, ...], min_decisions: int) -> list[HistoryPoint]:
    """Scores of stored counts under ``weights`` (INSUFFICIENT below the floor), by day then window."""
    points = []
    for c in sorted(counts, key=lambda c: (c.day, c.window)):
        score, coverage = weighted({n: r.ratio for n, r in zip(COMPONENTS, c.components, strict=True)}, weights)
        if c.decisions < min_decisions:
            score = None
        points.append(HistoryPoint(c.day, c.window, c.decisions, score,
                                   display_percent(score) if score is not None else None, coverage))
    return points
