"""The HTML pages (pure: results in, a page out): the index, the agent page, the methodology, sign-in and messages.

Each ``*_page`` function gathers what its template (``templates/``) shows and renders it; the handlers in
:mod:`daemon.http.views`, :mod:`daemon.http.signin` and :mod:`daemon.http.labelling` look the inputs up and call
them off the loop. Everything an agent or a reviewer wrote reaches the page through the templates' autoescape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import jinja2

from collectors.records import DayCounts, Label, Order
from daemon.config import COMPONENTS, Config
from daemon.http import charts
from daemon.http.rows import HEADS, AgentQuery, paged, row_views, select
from daemon.http.templating import environment, render
from daemon.http.urls import agent_href
from daemon.render import arithmetic
from daemon.reviews.queue import Review
from daemon.reviews.views import page_href, progress_text
from daemon.snapshot import Snapshot
from scorers.history import history_points
from scorers.progress import FLOOR, LabelTally, overall
from scorers.score import AgentResult, WindowResult

#: Days the agent page's chart shows, and the index's sparklines.
CHART_DAYS = 30
SPARK_DAYS = 7
SORTS = ("name", "score", "change")


@dataclass(frozen=True)
class Viewer:
    """Who is looking: the signed-in reviewer (None: nobody), the form token of the session, the page's own local
    URL (where sign-in and labels come back to) and a notice to show once."""

    reviewer: str | None = None
    csrf: str = ""
    here: str = "/"
    notice: str | None = None


ANONYMOUS = Viewer()


def _env(env: jinja2.Environment | None) -> jinja2.Environment:
    return env if env is not None else environment()


def score_text(a: AgentResult, min_decisions: int) -> str:
    """``87 %``, or ``INSUFFICIENT · N=3`` (the window's decisions, fewer than the floor)."""
    return f"INSUFFICIENT · N={a.decisions}" if a.score is None else f"{a.percent} %"


def band(a: AgentResult | None, week: AgentResult | None, cfg: Config) -> tuple[str, str]:
    """(CSS class, words) of a score against the alert thresholds: the colour always has its text beside it."""
    s = cfg.scoring
    if a is None:
        return "na", "not listed"
    if a.score is None:
        return "insufficient", f"INSUFFICIENT · N={a.decisions}"
    if a.score < s.alert_below - 1e-9:
        return "alert", f"below the {s.alert_below * 100:.0f} % alert"
    if week is not None and week.score is not None and week.score - a.score > s.drop_alert + 1e-9:
        return "drop", f"more than {s.drop_alert * 100:.0f} points under its 7d score"
    return "ok", f"at or above {s.alert_below * 100:.0f} %"


def daily_scores(counts: Sequence[DayCounts], cfg: Config, agent: str, window: str, days: Sequence[date]
                 ) -> list[charts.DayScore]:
    """The agent's stored daily score in ``window`` on those of ``days`` with a row (None: INSUFFICIENT), under the
    weights the agent is scored with now (history keeps counts, so every day re-renders the same way)."""
    version = cfg.weights_for(agent)[0]
    points = {p.day: p.score for p in history_points([c for c in counts if c.window == window],
                                                      cfg.weights_versions[version], cfg.scoring.min_decisions)}
    return [(d, points[d]) for d in days if d in points]


def last_days(today: date, n: int) -> list[date]:
    """The ``n`` days ending with ``today``, oldest first."""
    return [today - timedelta(days=n - 1 - k) for k in range(n)]


def _weights_table(cfg: Config, versions: Sequence[str]) -> dict[str, Any]:
    return {"versions": list(versions), "active": cfg.weights_active,
            "rows": [(c, [cfg.weights_versions[v][i] for v in versions]) for i, c in enumerate(COMPONENTS)]}


def _progress(t: LabelTally) -> dict[str, Any]:
    return {"tally": t, "floor": FLOOR, "missing": t.missing(FLOOR)}


@dataclass(frozen=True)
class ReviewLink:
    """An open review as the index and the agent page point to it."""

    id: str
    href: str
    agent: str
    reason: str
    why: str
    progress: str


def review_links(reviews: Sequence[Review]) -> list[ReviewLink]:
    """The open ones of ``reviews``, oldest first as given, as links to their pages."""
    return [ReviewLink(r.id, page_href(r.id), r.agent, r.reason, str(r.evidence.get("why", "")), progress_text(r))
            for r in reviews if r.is_open]


def dashboard_windows(snap: Snapshot) -> tuple[str, str | None]:
    """(the dashboard window, the 7 d window it is compared with): 24h and 7d when configured."""
    names = list(snap.windows)
    dash = "24h" if "24h" in names else names[0]
    week = "7d" if "7d" in names and dash != "7d" else None
    return dash, week


@dataclass(frozen=True)
class IndexRow:
    """One agent on the index."""

    agent: str
    href: str  # the agent page in the dashboard window
    cells: tuple[tuple[str, str, str], ...]  # per window: (text, href, css)
    band: tuple[str, str]
    spark: charts.Chart
    change: float | None
    decisions: int
    score: float | None
    unlabelled: int | None


def _sorted(rows: list[IndexRow], sort: str) -> list[IndexRow]:
    if sort == "score":  # the worst first, INSUFFICIENT after every number
        return sorted(rows, key=lambda r: (r.score is None, r.score if r.score is not None else 0.0, r.agent))
    if sort == "change":  # the biggest fall first, no change known last
        return sorted(rows, key=lambda r: (r.change is None, r.change if r.change is not None else 0.0, r.agent))
    return sorted(rows, key=lambda r: r.agent)


def index_page(snap: Snapshot, *, viewer: Viewer = ANONYMOUS, history: Sequence[DayCounts] = (),
               unlabelled: Mapping[str, int] | None = None, sort: str = "name", reviews: Sequence[Review] = (),
               env: jinja2.Environment | None = None) -> str:
    """Every agent's score in every window with its band, 7-day sparkline and change, unlabelled failures and open
    reviews (``reviews``: the queue's open ones)."""
    cfg = snap.config
    dash, week = dashboard_windows(snap)
    days = last_days(snap.at.date(), SPARK_DAYS)
    by_agent: dict[str, list[DayCounts]] = {}
    for c in history:
        by_agent.setdefault(c.agent, []).append(c)
    rows = []
    for agent in sorted({a for w in snap.windows.values() for a in w.agents}):
        cells = []
        for w, result in snap.windows.items():
            a = result.agents.get(agent)
            text = "—" if a is None else score_text(a, cfg.scoring.min_decisions)
            cells.append((text, agent_href(agent, w), "insufficient" if a is not None and a.score is None else ""))
        now = snap.windows[dash].agents.get(agent)
        ref = snap.windows[week].agents.get(agent) if week else None
        points = daily_scores(by_agent.get(agent, []), cfg, agent, dash, days)
        scored = [s for _, s in points if s is not None]
        rows.append(IndexRow(
            agent, agent_href(agent, dash), tuple(cells), band(now, ref, cfg),
            charts.sparkline(points, threshold=cfg.scoring.alert_below, title=f"{agent} · {dash} · last 7 days"),
            scored[-1] - scored[0] if len(scored) >= 2 else None, now.decisions if now else 0,
            now.score if now else None, None if unlabelled is None else unlabelled.get(agent, 0)))
    links = review_links(reviews)
    context = {"snap": snap, "cfg": cfg, "dash": dash, "rows": _sorted(rows, sort), "sort": sort, "sorts": SORTS,
               "viewer": viewer, "title": "honestyd", "floor": cfg.scoring.min_decisions,
               "progress": _progress(overall(snap.labels)), "counts_unlabelled": unlabelled is not None,
               "open_reviews": len(links), "reviews_of": {r.agent: [x for x in links if x.agent == r.agent]
                                                          for r in rows}}
    return render(_env(env), "index.html", context)


def agent_chart(cfg: Config, snap: Snapshot, agent: str, counts: Sequence[DayCounts],
                weight_changes: Sequence[tuple[date, str]]) -> charts.Chart:
    """The daily score of the last 30 days in every window, with the threshold, drops and weight changes marked."""
    days = last_days(snap.at.date(), CHART_DAYS)
    series = {w: daily_scores(counts, cfg, agent, w, days) for w in snap.windows}
    title = f"{agent}: daily score, last {CHART_DAYS} days, weights {cfg.weights_for(agent)[0]}"
    return charts.daily_chart(series, days, threshold=cfg.scoring.alert_below, drop=cfg.scoring.drop_alert,
                              weight_changes=weight_changes, title=title)


@dataclass(frozen=True)
class AgentInputs:
    """What the agent page shows besides the result: the page's rows' texts (None: the records' own, whole), every
    label on the window's decisions (with notes; also what the unlabelled filter reads), the history, the changes of
    weights."""

    texts: Mapping[Order, str] | None
    labels: Sequence[Label]
    history: Sequence[DayCounts] = ()
    weight_changes: Sequence[tuple[date, str]] = ()
    reviews: Sequence[Review] = ()  # the agent's open reviews


def agent_rows(a: AgentResult, q: AgentQuery, labels: Sequence[Label]) -> tuple[list[Any], Any]:
    """The rows of the query's page (filtered, newest first) and its pager."""
    labelled = {lb.decision for lb in labels}
    return paged(select(a.rows, q, labelled), q.page)


def audit_page(a: AgentResult, result: WindowResult, snap: Snapshot, *, query: AgentQuery | None = None,
               inputs: AgentInputs | None = None, viewer: Viewer = ANONYMOUS,
               env: jinja2.Environment | None = None) -> str:
    """The agent page: the score and its arithmetic, the chart, label progress, and the decisions, a page at a time,
    each with what the agent said, its outcomes, its labels and (signed in) the 👍/👎 form."""
    cfg = snap.config
    q = query or AgentQuery(result.window)
    inputs = inputs or AgentInputs(None, [])
    chunk, pager = agent_rows(a, q, inputs.labels)
    shown = {r.decision.id for r in chunk}
    views = row_views(chunk, inputs.texts, [lb for lb in inputs.labels if lb.decision in shown], viewer.reviewer)
    version = a.weights_version
    context = {
        "a": a, "result": result, "snap": snap, "cfg": cfg, "q": q, "pager": pager, "rows": views,
        "heads": HEADS, "components": COMPONENTS, "viewer": viewer, "floor": cfg.scoring.min_decisions,
        "score": score_text(a, cfg.scoring.min_decisions), "arithmetic": arithmetic(a),
        "weights": _weights_table(cfg, list(dict.fromkeys([version, cfg.weights_active]))),
        "chart": agent_chart(cfg, snap, a.agent, inputs.history, inputs.weight_changes),
        "progress": _progress(snap.labels.get(a.agent, LabelTally())),
        "others": [w for w in snap.windows if w != result.window],
        "reviews": review_links([r for r in inputs.reviews if r.agent == a.agent]),
        "title": f"{a.agent} · {result.window} · honestyd",
    }
    return render(_env(env), "agent.html", context)


def methodology_page(cfg: Config, agents: list[str], changelog: str, *, labels: Mapping[str, LabelTally] | None = None,
                     viewer: Viewer = ANONYMOUS, env: jinja2.Environment | None = None) -> str:
    """The formula, each agent's weight vector side by side, label progress, and the changelog."""
    versions = sorted({cfg.weights_active, *(cfg.weights_for(a)[0] for a in agents)})
    tallies = labels or {}
    context = {
        "cfg": cfg, "weights": _weights_table(cfg, versions), "viewer": viewer, "changelog": changelog,
        "contracts": [(a, cfg.weights_for(a)[0]) for a in agents], "floor": cfg.scoring.min_decisions,
        "progress": _progress(overall(tallies)), "tune_floor": FLOOR,
        "per_agent": [(a, tallies.get(a, LabelTally())) for a in agents], "title": "methodology · honestyd",
    }
    return render(_env(env), "methodology.html", context)


def login_page(*, viewer: Viewer, next_path: str, reviewer: str = "", error: str | None = None,
               env: jinja2.Environment | None = None) -> str:
    """The sign-in form (reviewer name and token), with what went wrong last time."""
    return render(_env(env), "login.html", {"viewer": viewer, "next": next_path, "reviewer": reviewer,
                                            "error": error, "title": "sign in · honestyd"})


def message_page(title: str, message: str, *, viewer: Viewer = ANONYMOUS, back: str | None = None,
                 env: jinja2.Environment | None = None) -> str:
    """A page saying one thing (an error, a refusal), with a way back."""
    return render(_env(env), "message.html", {"viewer": viewer, "title": title, "message": message,
                                              "back": back})
