"""The agent page's rows (pure): the query that selects them, the filters and paging, and each row as shown.

A row fails a component when the component counted more than it passed (a ✗, or some citations unresolved); the
index's count of unlabelled failures asks the live model the same (scorers/live/review.py). Labels on a row are each
reviewer's current one (spec 1.3), the signed-in reviewer's apart from the others'.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from urllib.parse import urlencode

from collectors.records import Label, Order
from daemon.config import COMPONENTS
from daemon.http.templating import anchor, cite_href
from daemon.http.urls import agent_href
from daemon.render import SHORT
from scorers.lookups import current_labels
from scorers.outcome import Outcome
from scorers.score import DecisionRow

#: Rows on one page of the agent page.
PER_PAGE = 100
#: Characters of a decision's text shown before the rest is folded away (behind <details>).
TEXT_HEAD = 280
#: The highest page number a query may ask for (far beyond any window).
MAX_PAGE = 1_000_000
EMOJI = {"up": "👍", "down": "👎"}


@dataclass(frozen=True)
class AgentQuery:
    """What the agent page's URL asks for: the window, the page, and the filters."""

    window: str
    page: int = 1
    failures: bool = False
    component: str | None = None
    unlabelled: bool = False

    def href(self, agent: str, **changes: object) -> str:
        """This query's page for ``agent`` with ``changes`` (a filter changed starts again at page 1)."""
        q = replace(self, **changes)  # type: ignore[arg-type]
        params = {"page": str(q.page) if q.page > 1 else "", "only": "failures" if q.failures else "",
                  "component": q.component or "", "unlabelled": "1" if q.unlabelled else ""}
        extra = urlencode({k: v for k, v in params.items() if v})
        return agent_href(agent, q.window) + (f"&{extra}" if extra else "")

    @property
    def filtered(self) -> bool:
        """Whether any filter is on."""
        return self.failures or self.component is not None or self.unlabelled


def parse_query(query: Mapping[str, str], windows: Sequence[str]) -> AgentQuery | str:
    """The query of an agent page's URL, or the message of the 400 its bad value gets (other keys are ignored: a
    dashboard's link may add its own)."""
    window = query.get("window", windows[0])
    if window not in windows:
        return f"unknown window {window!r}: one of {', '.join(windows)}"
    raw = query.get("page", "1")
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= MAX_PAGE:
        return f"page must be a whole number from 1 to {MAX_PAGE}, not {raw!r}"
    only = query.get("only", "")
    if only not in ("", "failures"):
        return f"only must be 'failures' (or left out), not {only!r}"
    component = query.get("component", "")
    if component and component not in COMPONENTS:
        return f"unknown component {component!r}: one of {', '.join(COMPONENTS)}"
    unlabelled = query.get("unlabelled", "")
    if unlabelled not in ("", "0", "1"):
        return f"unlabelled must be 1 or 0, not {unlabelled!r}"
    return AgentQuery(window, int(raw), only == "failures", component or None, unlabelled == "1")


def fails(outcome: Outcome) -> bool:
    """Whether an outcome counts against its component (counted more than passed)."""
    return outcome.counted > outcome.passed


def select(rows: Sequence[DecisionRow], q: AgentQuery, labelled: Collection[str]) -> list[DecisionRow]:
    """The rows the query's filters keep, newest first. ``component`` alone keeps the rows it applies to (counted or
    pending); with ``failures``, the rows failing it; ``failures`` alone, the rows failing any component."""
    out = []
    for row in sorted(rows, key=lambda r: (r.decision.ts, r.decision.order), reverse=True):
        outcomes = [row.outcomes[q.component]] if q.component else list(row.outcomes.values())
        if q.failures and not any(fails(o) for o in outcomes):
            continue
        if q.component and not q.failures and not (outcomes[0].counted or outcomes[0].pending):
            continue
        if q.unlabelled and row.decision.id in labelled:
            continue
        out.append(row)
    return out


@dataclass(frozen=True)
class Pager:
    """Where a page is among the pages of the selected rows."""

    page: int
    pages: int
    total: int
    first: int
    last: int


def paged(rows: Sequence[DecisionRow], page: int, per: int = PER_PAGE) -> tuple[list[DecisionRow], Pager]:
    """The rows of page ``page`` (1-based; beyond the last: none) and the pager."""
    pages = max(1, math.ceil(len(rows) / per))
    start = (page - 1) * per
    chunk = list(rows[start:start + per])
    return chunk, Pager(page, pages, len(rows), start + 1 if chunk else 0, start + len(chunk) if chunk else 0)


@dataclass(frozen=True)
class LabelView:
    """One reviewer's current label on a row."""

    reviewer: str
    value: str
    emoji: str
    ts: datetime
    note: str | None


@dataclass(frozen=True)
class Cell:
    """One component's cell: its CSS class, its mark and why."""

    component: str
    css: str
    mark: str
    why: str


@dataclass(frozen=True)
class RowView:
    """A decision as its row shows it."""

    id: str
    anchor: str
    ts: datetime | None  # None: a review recorded no valid time of it (its file was written by hand)
    kind: str
    location: str
    thread: str | None
    prompt: str | None
    head: str
    rest: str
    #: The store had no text for it (being rebuilt): the row says so rather than show the model's reduction.
    missing_text: bool
    citations: tuple[tuple[str, str | None], ...]
    cells: tuple[Cell, ...]
    failing: bool
    mine: LabelView | None
    others: tuple[LabelView, ...]


def cell(component: str, o: Outcome) -> Cell:
    """The cell of one outcome (``resolved/checked`` is ok only when every cited target resolved)."""
    if "/" in o.mark:
        left, _, right = o.mark.partition("/")
        css = "ok" if left == right else "bad"
    else:
        css = {"✓": "ok", "✗": "bad", "pending": "pending"}.get(o.mark, "na")
    return Cell(component, css, o.mark, o.why)


def split_text(text: str, head: int = TEXT_HEAD) -> tuple[str, str]:
    """The first ``head`` characters or so (cut at a space when one is near), and the rest."""
    if len(text) <= head:
        return text, ""
    cut = text.rfind(" ", head - 40, head)
    cut = cut if cut > 0 else head
    return text[:cut], text[cut:]


def row_view(row: DecisionRow, text: str | None, labels: Sequence[Label], me: str | None) -> RowView:
    """``row`` as shown: ``text`` what the agent said (None: not available), ``labels`` every stored label on it
    (with notes), ``me`` the signed-in reviewer."""
    d = row.decision
    head, rest = split_text(text or "")
    mine, others = label_views(labels, me)
    return RowView(
        d.id, anchor(d.id), d.ts, d.kind, d.location, d.thread, d.prompt, head, rest, text is None,
        tuple((f"{c.type}: {c.target}", cite_href(c)) for c in d.citations),
        tuple(cell(c, row.outcomes[c]) for c in COMPONENTS if c in row.outcomes),
        any(fails(o) for o in row.outcomes.values()), mine, others)


def label_views(labels: Sequence[Label], me: str | None) -> tuple[LabelView | None, tuple[LabelView, ...]]:
    """(the signed-in reviewer's current label, every other reviewer's) among ``labels``, all on one decision."""
    views = [LabelView(lb.reviewer, lb.value, EMOJI.get(lb.value, lb.value), lb.ts, lb.note)
             for lb in current_labels(labels)]
    mine = next((v for v in views if v.reviewer == me), None) if me is not None else None
    return mine, tuple(v for v in views if v is not mine)


def bare_row(decision: str, ts: datetime | None, kind: str, location: str, labels: Sequence[Label], me: str | None
             ) -> RowView:
    """A failing decision known only by what a review recorded of it (it left the window): its labels and the form,
    no text and no outcomes (the row's template says why instead)."""
    mine, others = label_views(labels, me)
    return RowView(decision, anchor(decision), ts, kind, location, None, None, "", "", False, (), (), True, mine,
                   others)


def row_views(rows: Sequence[DecisionRow], texts: Mapping[Order, str] | None, labels: Sequence[Label],
              me: str | None) -> list[RowView]:
    """Every row of a page as shown (see :func:`row_view`); ``texts`` the store's by position (None: the records'
    own texts are whole, as in an evaluation from the files)."""
    by_decision: dict[str, list[Label]] = {}
    for lb in labels:
        by_decision.setdefault(lb.decision, []).append(lb)
    return [row_view(r, r.decision.text if texts is None else texts.get(r.decision.order),
                     by_decision.get(r.decision.id, ()), me) for r in rows]


#: The components' short names, in spec order, for the table's head.
HEADS = tuple((c, SHORT[c]) for c in COMPONENTS)
