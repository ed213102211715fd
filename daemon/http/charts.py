"""The pictures of the pages, as geometry (pure): the daily score chart of the agent page and the index's sparklines.

:func:`daily_chart` and :func:`sparkline` turn daily scores into a :class:`Chart`: runs of points joined by lines,
lone points as dots, days without a score (INSUFFICIENT, or no row) as gaps the line does not cross, the alert
threshold as a line, and marks (a change of weights, a drop of the score). The template ``_chart.svg`` draws a Chart
as inline SVG, so every text in it is escaped like the rest of the page; no image is fetched from anywhere.
Scores are fractions (0–1) on a fixed axis, so two charts read alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

#: One day's score of one series: None for a day without a number (INSUFFICIENT, or no row stored).
DayScore = tuple[date, float | None]

#: Stroke colours of the series, in order (the first is the dashboard window): distinct without colour too, by dash.
STROKES = (("#1f5fbf", ""), ("#6b3fa0", "6 3"), ("#7a7a7a", "2 3"))


@dataclass(frozen=True)
class Point:
    """A point of a series: its position, and what its tooltip says."""

    x: float
    y: float
    title: str


@dataclass(frozen=True)
class Plot:
    """One series as drawn: joined runs of consecutive scored days, and the days scored alone as dots."""

    name: str
    stroke: str
    dash: str
    runs: tuple[tuple[Point, ...], ...]
    dots: tuple[Point, ...]

    def polyline(self, run: Sequence[Point]) -> str:
        """The ``points`` attribute of one run."""
        return " ".join(f"{p.x:.1f},{p.y:.1f}" for p in run)


@dataclass(frozen=True)
class Mark:
    """A vertical mark at one day: ``kind`` is ``weights`` (a change of weights) or ``drop`` (a fall of the score),
    ``gap`` (a day without a score)."""

    x: float
    y: float
    kind: str
    title: str


@dataclass(frozen=True)
class Chart:
    """Everything the template draws (coordinates in SVG user units, origin top left)."""

    width: int
    height: int
    title: str
    plots: tuple[Plot, ...] = ()
    #: (y, label) of the alert threshold, or None.
    threshold: tuple[float, str] | None = None
    marks: tuple[Mark, ...] = ()
    #: Tick labels: (x, text) under the plot, (y, text) left of it.
    x_ticks: tuple[tuple[float, str], ...] = ()
    y_ticks: tuple[tuple[float, str], ...] = ()
    #: The plot area: left, top, right, bottom.
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    #: Said instead of a plot when no day has a score.
    empty: str = ""
    legend: tuple[tuple[str, str, str], ...] = field(default=())  # (name, stroke, dash)

    @property
    def points(self) -> int:
        """How many scored days the chart shows, all series together."""
        return sum(len(r) for p in self.plots for r in p.runs) + sum(len(p.dots) for p in self.plots)


def _percent(score: float) -> str:
    return f"{score * 100:.0f} %"


def _plot(name: str, style: tuple[str, str], days: Sequence[DayScore], x_of: Mapping[date, float],
          y_of: _Scale) -> Plot:
    runs: list[tuple[Point, ...]] = []
    run: list[Point] = []
    previous: date | None = None
    for day, score in days:
        if run and previous is not None and (day - previous).days != 1:  # a day with no row lies between
            runs.append(tuple(run))
            run = []
        previous = day
        if score is None or day not in x_of:
            if run:
                runs.append(tuple(run))
            run = []
            continue
        run.append(Point(x_of[day], y_of(score), f"{name} · {day.isoformat()} · {_percent(score)}"))
    if run:
        runs.append(tuple(run))
    dots = tuple(r[0] for r in runs if len(r) == 1)
    return Plot(name, style[0], style[1], tuple(r for r in runs if len(r) > 1), dots)


class _Scale:
    """Score (0–1) to y, on the fixed axis of a plot area."""

    def __init__(self, top: float, bottom: float) -> None:
        self.top, self.bottom = top, bottom

    def __call__(self, score: float) -> float:
        return self.bottom - max(0.0, min(1.0, score)) * (self.bottom - self.top)


def _x_positions(days: Sequence[date], left: float, right: float) -> dict[date, float]:
    if len(days) == 1:
        return {days[0]: (left + right) / 2}
    step = (right - left) / (len(days) - 1)
    return {d: left + i * step for i, d in enumerate(days)}


def drops(days: Sequence[DayScore], drop: float) -> list[tuple[date, float, float]]:
    """(day, before, after) where the score fell more than ``drop`` from the previous scored day."""
    out = []
    previous: float | None = None
    for day, score in days:
        if score is None:
            continue
        if previous is not None and previous - score > drop + 1e-9:
            out.append((day, previous, score))
        previous = score
    return out


def daily_chart(series: Mapping[str, Sequence[DayScore]], days: Sequence[date], *, threshold: float | None = None,
                drop: float | None = None, weight_changes: Sequence[tuple[date, str]] = (), title: str = "",
                width: int = 760, height: int = 240) -> Chart:
    """The daily score of each series (window) over ``days`` (oldest first), with the threshold and the marks.

    Gaps: a day without a score in a series, or without a row, breaks its line; the first series' INSUFFICIENT days
    get a grey tick at the foot. Marks: ``weight_changes`` (day, what changed) inside the span; a fall of the first
    series' score of more than ``drop`` from its previous scored day.
    """
    left, top, right, bottom = 44.0, 12.0, width - 12.0, height - 46.0
    y_of = _Scale(top, bottom)
    x_of = _x_positions(days, left, right)
    plots = tuple(_plot(name, STROKES[i % len(STROKES)], points, x_of, y_of)
                  for i, (name, points) in enumerate(series.items()))
    marks: list[Mark] = []
    first = next(iter(series.values()), ())
    for day, score in first:
        if score is None and day in x_of:
            marks.append(Mark(x_of[day], bottom, "gap", f"{day.isoformat()} · INSUFFICIENT: too few decisions for a"
                                                        " score (no number)"))
    if drop is not None:
        for day, before, after in drops(first, drop):
            if day in x_of:
                marks.append(Mark(x_of[day], y_of(after), "drop", f"{day.isoformat()} · score drop "
                                                                  f"{_percent(before)} → {_percent(after)}"))
    for day, what in weight_changes:
        if day in x_of:
            marks.append(Mark(x_of[day], top, "weights", f"{day.isoformat()} · weights changed: {what}"))
    every = max(1, len(days) // 6)
    x_ticks = tuple((x_of[d], d.strftime("%b %d")) for i, d in enumerate(days) if i % every == 0)
    y_ticks = tuple((y_of(v), f"{v * 100:.0f}") for v in (0.0, 0.5, 1.0))
    chart = Chart(width, height, title, plots,
                  (y_of(threshold), f"alert below {threshold * 100:.0f} %") if threshold is not None else None,
                  tuple(marks), x_ticks, y_ticks, (left, top, right, bottom),
                  legend=tuple((p.name, p.stroke, p.dash) for p in plots))
    if not chart.points:
        return Chart(width, height, title, threshold=chart.threshold, marks=chart.marks, x_ticks=x_ticks,
                     y_ticks=y_ticks, box=chart.box, empty="no daily score yet: every day so far is INSUFFICIENT or"
                                                           " has no stored history", legend=chart.legend)
    return chart


def sparkline(points: Sequence[DayScore], *, threshold: float | None = None, title: str = "", width: int = 120,
              height: int = 28) -> Chart:
    """A small line of daily scores (oldest first), the alert threshold as a faint line, gaps left open."""
    days = [d for d, _ in points]
    left, top, right, bottom = 2.0, 3.0, width - 2.0, height - 3.0
    y_of = _Scale(top, bottom)
    x_of = _x_positions(days, left, right) if days else {}
    plot = _plot(title or "score", STROKES[0], points, x_of, y_of)
    return Chart(width, height, title, (plot,),
                 (y_of(threshold), f"alert below {threshold * 100:.0f} %") if threshold is not None else None,
                 box=(left, top, right, bottom),
                 empty="" if (plot.runs or plot.dots) else "no daily score")
