"""The review queue's pages (pure: reviews in, a page out): the queue, and one review beside the live audit.

A review's page shows what the review recorded when it (last) opened — the reason in words, the window, the score
with its interval and N, the weights version, the decisions that failed a component with the components and their
``file:line`` — and, beside each of those decisions, its row in the live audit as the agent page shows it (what the
agent said, its outcomes now, every reviewer's label and, signed in, the 👍/👎 form), then the note that closes it.

The evidence is read from a review file, which a person may have written by hand: every field is checked for its type
here and shown as text (``—`` when missing), and everything reaches the page through the templates' autoescape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2

from collectors.records import Label, Order
from collectors.reviews import ReviewEvent, listed
from collectors.rfc3339 import TimestampError, parse_ts
from daemon.http.pages import ANONYMOUS, Viewer, band, score_text
from daemon.http.rows import HEADS, RowView, bare_row, row_views
from daemon.http.templating import environment, percent, render
from daemon.http.urls import agent_href
from daemon.reviews.queue import Review
from daemon.reviews.views import age_text, page_href, progress_text
from daemon.snapshot import Snapshot
from scorers.score import AgentResult

#: The values the queue's ``?state=`` takes (none: every review, the open ones first).
STATES = ("open", "closed")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def score_at_opening(evidence: Mapping[str, Any]) -> str:
    """``64 % [0.52–0.75] · N = 20 decisions``: the score a review recorded, its interval and N (``—`` for what it
    lacks)."""
    pct = _int(evidence.get("percent"))
    words = f"{pct} %" if pct is not None else "—"
    interval = evidence.get("interval")
    if isinstance(interval, list) and len(interval) == 2 and all(_number(x) is not None for x in interval):
        words += f" [{float(interval[0]):.2f}–{float(interval[1]):.2f}]"
    n = _int(evidence.get("decisions"))
    return words + (f" · N = {n} decisions" if n is not None else "")


def window_of(review: Review) -> str:
    """The window the review's score is of (``24h`` when the line does not say)."""
    return _text(review.evidence.get("window")) or "24h"


@dataclass(frozen=True)
class QueueRow:
    """One review as the queue lists it."""

    id: str
    href: str
    agent: str
    audit: str  # the agent's live audit in the review's window
    reason: str
    why: str
    state: str
    score: str
    window: str
    opened: datetime
    by: str
    rounds: int
    age: str
    progress: str
    closed_at: datetime | None
    closed_by: str
    note: str


def queue_row(review: Review, now: datetime) -> QueueRow:
    """``review`` as its row in the queue, its age counted at ``now``."""
    ev = review.evidence
    window = window_of(review)
    return QueueRow(review.id, page_href(review.id), review.agent, agent_href(review.agent, window), review.reason,
                    _text(ev.get("why")), review.state, score_at_opening(ev), window, review.since,
                    _text(ev.get("by")), review.rounds, age_text(review.age(now)), progress_text(review),
                    None if review.is_open else review.closed_at, review.closed_by or "", review.note)


def queue_page(reviews: Sequence[Review], now: datetime, *, state: str | None = None, viewer: Viewer = ANONYMOUS,
               env: jinja2.Environment | None = None) -> str:
    """The queue: open reviews first, oldest first (as ``reviews`` come, from ``Backend.review_list``), then the closed
    ones; ``state`` says which of the two the page was asked for (None: both)."""
    rows = [queue_row(r, now) for r in reviews]
    context = {"viewer": viewer, "state": state, "states": STATES, "now": now,
               "open": [r for r in rows if r.state == "open"], "closed": [r for r in rows if r.state != "open"],
               "title": "review queue · honestyd"}
    return render(env or environment(), "reviews.html", context)


@dataclass(frozen=True)
class EvidenceRow:
    """A decision the review lists: the components it failed at opening, and its row (live, or known only by what
    the review recorded when it has left the window)."""

    row: RowView
    components: tuple[str, ...]
    live: bool


def _components(entry: Mapping[str, Any]) -> tuple[str, ...]:
    found = entry.get("components")
    return tuple(c for c in found if isinstance(c, str)) if isinstance(found, list) else ()


def _ts(value: Any) -> datetime | None:
    try:
        return parse_ts(value) if isinstance(value, str) else None
    except TimestampError:
        return None


def evidence_rows(review: Review, live: AgentResult | None, texts: Mapping[Order, str] | None,
                  labels: Sequence[Label], me: str | None) -> list[EvidenceRow]:
    """Each decision the review lists, in its order (newest first), beside its live row when ``live`` (the agent's
    result with its audit rows, in the review's window) has it; ``labels`` every stored label on them."""
    by_id = {r.decision.id: r for r in live.rows} if live is not None else {}
    failed = review.evidence.get("failed")
    entries = [d for d in listed(failed) if isinstance(d, Mapping) and isinstance(d.get("id"), str)]
    seen: set[str] = set()
    out = []
    for entry in entries:
        decision = entry["id"]
        if decision in seen:  # a hand-written line may list one twice: one row (and one form) per decision
            continue
        seen.add(decision)
        mine = [lb for lb in labels if lb.decision == decision]
        found = by_id.get(decision)
        if found is not None:
            [row] = row_views([found], texts, mine, me)
        else:
            row = bare_row(decision, _ts(entry.get("ts")), _text(entry.get("kind")), _text(entry.get("source")), mine,
                           me)
        out.append(EvidenceRow(row, _components(entry), found is not None))
    return out


@dataclass(frozen=True)
class LiveScore:
    """The agent's score in the review's window now, from the latest evaluation."""

    at: datetime
    text: str
    interval: tuple[float, float] | None
    band: tuple[str, str]


def live_score(snap: Snapshot | None, agent: str, window: str) -> LiveScore | None:
    """The agent's score now in ``window`` with its band (None: the latest evaluation has none)."""
    result = snap.windows.get(window) if snap is not None else None
    a = result.agents.get(agent) if result is not None else None
    if snap is None or result is None or a is None:
        return None
    week = snap.windows["7d"].agents.get(agent) if "7d" in snap.windows and window != "7d" else None
    return LiveScore(result.at, score_text(a, snap.config.scoring.min_decisions), a.interval,
                     band(a, week, snap.config))


def review_page(review: Review, now: datetime, *, snap: Snapshot | None = None, live: AgentResult | None = None,
                texts: Mapping[Order, str] | None = None, labels: Sequence[Label] = (), viewer: Viewer = ANONYMOUS,
                env: jinja2.Environment | None = None) -> str:
    """One review: the snapshot it recorded beside the live audit of its decisions (``live``: the agent's result with
    its rows in the review's window; ``texts`` theirs), the 👍/👎 forms, the close form or the close, the alerts and the
    history."""
    ev = review.evidence
    window = window_of(review)
    ref = ev.get("reference")
    reference = None
    if isinstance(ref, Mapping):
        pct = _int(ref.get("percent"))
        reference = (_text(ref.get("window")) or "7d", f"{pct} %" if pct is not None else "—",
                     _int(ref.get("decisions")))
    rows = evidence_rows(review, live, texts, labels, viewer.reviewer)
    context = {
        "viewer": viewer, "r": review, "q": queue_row(review, now), "window": window, "heads": HEADS,
        "weights": _text(ev.get("weights_version")) or "—", "reference": reference,
        "threshold": percent(_number(ev.get("threshold"))), "failed_total": _int(ev.get("failed_total")),
        "rows": rows, "gone": sum(1 for e in rows if not e.live), "live": live_score(snap, review.agent, window),
        "audit": agent_href(review.agent, window) + "&only=failures",
        "history": [history_entry(e) for e in review.history],
        "title": f"review {review.id} · {review.agent} · honestyd",
    }
    return render(env or environment(), "review.html", context)


def history_entry(e: ReviewEvent) -> tuple[datetime, str, str, str]:
    """(time, event, who, what) of one event of a review's history, as text."""
    data = e.data
    who = _text(data.get("reviewer")) or _text(data.get("alertname")) or _text(data.get("by"))
    what = _text(data.get("note")) or _text(data.get("value")) or _text(data.get("status")) or _text(data.get("why"))
    if data.get("event") == "labelled":
        what = f"{_text(data.get('value'))} on {_text(data.get('decision'))}"
    return e.ts, e.event, who, what
