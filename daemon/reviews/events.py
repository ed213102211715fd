"""The review events honestyd writes (pure): each a JSON object, one line of ``reviews/honestyd.jsonl``.

An ``opened`` (or ``reopened``) event carries the evidence as it stood then, so the review still says what was wrong
after the window has slid past it: the score, its interval and N, the weights version, the reason in words, and the
decisions that failed a component in the window (id, the components failed, file:line), with the live audit's link.
The list holds at most :data:`MAX_FAILED` decisions and :data:`FAILED_BYTES` bytes of them, newest first, so a line
stays far below the 1 MiB a line may hold (spec 1.1); ``failed_total`` counts them all.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from collectors.reviews import Listed, event_id
from collectors.rfc3339 import format_ts
from daemon.changelog.markdown import points
from daemon.http.urls import agent_href
from daemon.reviews.queue import Queue
from daemon.reviews.rule import Condition, Key
from scorers.score import AgentResult, display_percent
from scorers.spec import COMPONENTS

#: The most decisions an opening lists, and the most bytes their entries take (the rest are counted only).
MAX_FAILED = 200
FAILED_BYTES = 256 * 1024
#: Who opened a review: honestyd's own rule, or an Alertmanager notification.
BY_RULE, BY_ALERT = "honestyd", "alertmanager"


def review_id(agent: str, reason: str, at: datetime) -> str:
    """A new review's id: ``r-YYYYMMDD-`` and 8 hex digits of SHA-256 of (agent, reason, time)."""
    digest = hashlib.sha256(f"{agent}\0{reason}\0{format_ts(at)}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"r-{at:%Y%m%d}-{digest[:8]}"


def _pct(result: AgentResult | None) -> str:
    return f"{display_percent(result.score)} %" if result is not None and result.score is not None else "—"


def reason_words(c: Condition, since: datetime, *, at_start: bool = False) -> str:
    """The reason in words: ``dropped from 92 % to 64 % in 24h``, or ``below the 70 % threshold since 2026-05-03``.

    ``since``: when the reason was first seen (an alert's start); ``at_start``: it was already so when honestyd
    started, so it began at that date at the latest.
    """
    if c.reason == "drop":
        if c.reference is None:
            return f"more than {points(c.drop_alert)} points below its {c.reference_window or '7d'} score"
        return f"dropped from {_pct(c.reference)} to {_pct(c.result)} in {c.window}"
    words = f"below the {points(c.threshold)} % threshold since {since:%Y-%m-%d}"
    return f"{words} at the latest (already below when honestyd started)" if at_start else words


#: What an opening lists of the window's failing decisions: (the listed ones, how many failed in all).
Failed = tuple[Sequence[dict[str, Any]], int]


def failed_rows(audited: AgentResult) -> Failed:
    """(the listed failing decisions, how many failed in all): each decision of the window that failed a component,
    newest first, within :data:`MAX_FAILED` and :data:`FAILED_BYTES`. Listed as text (a :class:`Listed`): a start
    below the threshold opens a review for each agent at once, whose lists held as dicts together took ~7 MB."""
    rows = []
    for row in sorted(audited.rows, key=lambda r: (r.decision.ts, r.decision.order), reverse=True):
        failed = [c for c in COMPONENTS if row.outcomes[c].counted > row.outcomes[c].passed]
        if failed:
            d = row.decision
            rows.append({"id": d.id, "ts": format_ts(d.ts), "kind": d.kind, "components": failed,
                         "source": d.location})
    listed: list[dict[str, Any]] = []
    size = 0
    for entry in rows[:MAX_FAILED]:
        size += len(json.dumps(entry, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > FAILED_BYTES:
            break
        listed.append(entry)
    return Listed(listed), len(rows)


def _score(result: AgentResult | None, window: str | None) -> dict[str, Any] | None:
    if result is None or window is None:
        return None
    return {"window": window, "score": result.score, "percent": result.percent, "decisions": result.decisions}


def evidence(c: Condition, failed: Failed | None, why: str, by: str) -> dict[str, Any]:
    """What an opening records: the numbers of ``c`` and the decisions that failed a component (``failed``: of
    :func:`failed_rows`; None when the model could not give the audit rows)."""
    a = c.result
    listed, total = failed if failed is not None else ([], 0)
    return {
        "agent": c.agent, "reason": c.reason, "why": why, "by": by, "window": c.window,
        "score": a.score, "percent": a.percent, "interval": list(a.interval) if a.interval is not None else None,
        "decisions": a.decisions, "weights_version": a.weights_version, "threshold": c.threshold,
        "drop_alert": c.drop_alert, "reference": _score(c.reference, c.reference_window),
        "audit": agent_href(c.agent, c.window), "failed": listed, "failed_total": total,
    }


def opening(review: str, at: datetime, evidence_: Mapping[str, Any], *, reopen: bool = False) -> dict[str, Any]:
    """The ``opened`` (or ``reopened``) event of ``review`` at ``at``."""
    return {"ts": format_ts(at), "review": review, "event": "reopened" if reopen else "opened", **evidence_}


def closing(review: str, at: datetime, reviewer: str, note: str) -> dict[str, Any]:
    """The ``closed`` event: who closed the review, and the note they left."""
    return {"ts": format_ts(at), "review": review, "event": "closed", "reviewer": reviewer, "note": note}


def labelling(review: str, at: datetime, decision: str, value: str, reviewer: str) -> dict[str, Any]:
    """The ``labelled`` event: a reviewer's 👍/👎 on one of the review's decisions."""
    return {"ts": format_ts(at), "review": review, "event": "labelled", "decision": decision, "value": value,
            "reviewer": reviewer}


def alerting(review: str, at: datetime, alertname: str, status: str, fingerprint: str, starts_at: str
             ) -> dict[str, Any]:
    """The ``alert`` event: an Alertmanager notification (firing or resolved) recorded on the review."""
    return {"ts": format_ts(at), "review": review, "event": "alert", "alertname": alertname, "status": status,
            "fingerprint": fingerprint, "starts_at": starts_at}


def encode(event: Mapping[str, Any]) -> tuple[bytes, str]:
    """(the line to append, the event's id): the id a reader gives the line (collectors/reviews.py)."""
    body = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=_items).encode("utf-8")
    return body + b"\n", event_id(body)


def _items(value: object) -> list[Any]:
    """A :class:`Listed` as JSON encodes it: the list it holds (the same text as the list's)."""
    if isinstance(value, Listed):
        return value.items()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def openings(due: Sequence[Condition], queue: Queue, at: datetime, failed: Mapping[Key, Failed | None], *,
             at_start: bool, by: str = BY_RULE, since: datetime | None = None) -> list[dict[str, Any]]:
    """The events that open the ``due`` reviews at ``at``: ``reopened`` on the latest review of (agent, reason) when
    it is closed, else ``opened`` with a new id. ``failed``: each condition's failing decisions (:func:`failed_rows`
    of its audit); ``at_start``: the first evaluation after a start; ``since``: when the reason began (an
    alert's start; default ``at``)."""
    out = []
    for c in due:
        latest = queue.latest_for(*c.key)
        reopen = latest is not None and not latest.is_open
        rid = latest.id if latest is not None and reopen else review_id(c.agent, c.reason, at)
        why = reason_words(c, since or at, at_start=at_start and since is None)
        out.append(opening(rid, at, evidence(c, failed.get(c.key), why, by), reopen=reopen))
    return out
