"""A review as the readers see it (pure): JSON for the API and the pages, Markdown for ``honestyd reviews show``
(written to paste into an issue tracker), and the changelog's entries of its openings and its close."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

from collectors.reviews import ReviewEvent, listed
from collectors.rfc3339 import format_ts
from daemon.changelog.entries import Entry
from daemon.changelog.markdown import key_part, md_code, md_text, utc, utc_stamp
from daemon.http.urls import agent_href
from daemon.reviews.queue import Queue, Review

#: The most characters of a close's note that the changelog's one line shows (the review file keeps it whole).
NOTE_IN_CHANGELOG = 280


def page_href(review_id: str) -> str:
    """The review's page in the reviewer workspace (ids hold only URL-safe characters: collectors/reviews.py)."""
    return f"/reviews/{review_id}"


def api_href(review_id: str) -> str:
    """The review as JSON."""
    return f"/v1/reviews/{review_id}"


def progress_text(review: Review) -> str:
    """``3 of 17 decisions labelled``."""
    done, listed = review.progress()
    return f"{done} of {listed} decision{'' if listed == 1 else 's'} labelled"


def _closed(review: Review) -> dict[str, Any] | None:
    if review.is_open or review.closed_at is None:
        return None
    return {"at": format_ts(review.closed_at), "reviewer": review.closed_by, "note": review.note}


def summary(review: Review, now: datetime) -> dict[str, Any]:
    """One review as ``GET /v1/reviews`` lists it: whose, why, its state, age and progress."""
    ev = review.evidence
    done, listed = review.progress()
    return {
        "id": review.id, "agent": review.agent, "reason": review.reason, "why": ev.get("why", ""),
        "state": review.state, "window": ev.get("window"), "opened_at": format_ts(review.opened_at),
        "since": format_ts(review.since), "age_seconds": round(review.age(now), 3), "rounds": review.rounds,
        "by": ev.get("by", ""),
        "progress": {"labelled": done, "decisions": listed, "text": progress_text(review)},
        "score": ev.get("score"), "percent": ev.get("percent"), "interval": ev.get("interval"),
        "decisions": ev.get("decisions"), "weights_version": ev.get("weights_version"),
        "links": {"page": page_href(review.id), "api": api_href(review.id), "audit": ev.get("audit")},
        "closed": _closed(review),
    }


def _history_entry(e: ReviewEvent) -> dict[str, Any]:
    keep = ("why", "by", "reviewer", "note", "decision", "value", "alertname", "status", "starts_at")
    return {"ts": format_ts(e.ts), "event": e.event, **{k: e.data[k] for k in keep if k in e.data}}


def detail(review: Review, now: datetime) -> dict[str, Any]:
    """One review as ``GET /v1/reviews/{id}`` gives it: the summary, the evidence's decisions with their labels, the
    alerts recorded and the history of its events."""
    ev = review.evidence
    failed = []
    for d in listed(ev.get("failed")):
        label = review.labels.get(str(d.get("id"))) if isinstance(d, dict) else None
        failed.append({**d, "label": None if label is None else
                       {"value": label.value, "reviewer": label.reviewer, "at": format_ts(label.at)}})
    return {
        **summary(review, now), "threshold": ev.get("threshold"), "drop_alert": ev.get("drop_alert"),
        "reference": ev.get("reference"), "failed": failed, "failed_total": ev.get("failed_total", len(failed)),
        "alerts": [{"alertname": a.alertname, "status": a.status, "fingerprint": a.fingerprint,
                    "starts_at": a.starts_at, "at": format_ts(a.at)} for a in review.alerts],
        "history": [_history_entry(e) for e in review.history],
    }


# --- Markdown (honestyd reviews show)


def age_text(seconds: float) -> str:
    """A duration as the queue shows it, to the minute: ``2d 3h 5m``, ``4h 0m``, ``7m``."""
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days}d"] if days else []
    parts += [f"{hours}h"] if hours or days else []
    return " ".join([*parts, f"{mins}m"])


def _link(path: Any, base: str) -> str:
    text = str(path or "")
    return f"[{md_code(text)}]({base}{text})" if text else "—"


def _percent(value: Any) -> str:
    return f"{value} %" if isinstance(value, int) else "—"


def _interval(value: Any) -> str:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, int | float) for x in value):
        return f"{value[0] * 100:.0f}–{value[1] * 100:.0f} %"
    return "—"


def markdown(review: Review, now: datetime, base: str = "") -> str:
    """The review as Markdown for an issue tracker; links are made absolute with ``base`` (say
    ``https://honestyd.example.org``), else they are paths on the daemon."""
    d = detail(review, now)
    agent = md_text(review.agent)
    state = "open" if review.is_open else "closed"
    lines = [f"### Review {md_code(review.id)} · {agent} · {md_text(review.reason)} ({state})", "",
             f"{agent}'s {md_text(str(d['window']))} honesty score is **{_percent(d['percent'])}** "
             f"({md_text(str(d['why']))}).", "",
             f"- Opened: {format_ts(review.since)} by {md_text(str(d['by']))}"
             + (f" (round {review.rounds}; first opened {format_ts(review.opened_at)})" if review.rounds > 1 else "")
             + f"; {state} for {age_text(review.age(now))}",
             f"- Score: {_percent(d['percent'])}, 95 % interval {_interval(d['interval'])}, "
             f"N = {d['decisions']} decisions, weights {md_text(str(d['weights_version']))}"]
    ref = d.get("reference")
    if isinstance(ref, Mapping):
        lines.append(f"- {md_text(str(ref.get('window')))}: {_percent(ref.get('percent'))} "
                     f"({ref.get('decisions')} decisions)")
    lines += [f"- Progress: {progress_text(review)}", f"- Live audit: {_link(d['links']['audit'], base)}",
              f"- Review: {_link(d['links']['page'], base)}", ""]
    if d["failed"]:
        lines += ["| decision | time | kind | failed | source | label |", "|---|---|---|---|---|---|"]
        for f in d["failed"]:
            label = f["label"]
            mark = "—" if label is None else f"{'👍' if label['value'] == 'up' else '👎'} {md_text(label['reviewer'])}"
            lines.append(f"| {md_code(str(f.get('id')))} | {f.get('ts')} | {md_text(str(f.get('kind')))} | "
                         f"{', '.join(f.get('components', []))} | {md_code(str(f.get('source')))} | {mark} |")
        lines += ["", f"{d['failed_total']} decisions failed a component in the window; {len(d['failed'])} listed.",
                  ""]
    else:
        lines += ["No decision of the window failed a component.", ""]
    if d["closed"] is not None:
        lines += [f"Closed {d['closed']['at']} by {md_text(str(d['closed']['reviewer']))}: "
                  f"{md_text(d['closed']['note']) or '(no note)'}", ""]
    lines.append("History:")
    for h in d["history"]:
        who = h.get("reviewer") or h.get("alertname") or h.get("by") or ""
        what = h.get("note") or h.get("value") or h.get("status") or h.get("why") or ""
        lines.append(f"- {h['ts']} {h['event']}" + (f" · {md_text(str(who))}" if who else "")
                     + (f" · {md_text(str(what))}" if what else ""))
    return "\n".join(lines) + "\n"


# --- the changelog's entries


def _entry(review: Review, e: ReviewEvent) -> Entry | None:
    key = f"review:{review.id}:{e.event}:{key_part(e.id)}"  # ids of hand-written lines may hold any character
    link = f"review [{md_code(review.id)}]({page_href(review.id)})"
    stamp, agent = utc_stamp(e.ts), md_text(review.agent)
    if e.event == "closed":
        note = str(e.data.get("note", ""))
        note = note if len(note) <= NOTE_IN_CHANGELOG else note[:NOTE_IN_CHANGELOG] + "…"
        body = (f"**Review closed** · {agent} · {stamp} · {link} ({md_text(review.reason)}) closed by "
                f"{md_text(str(e.data.get('reviewer')))}: {md_text(note) or '(no note)'}")
    elif e.event in ("opened", "reopened"):
        title = "**Score drop**" if review.reason == "drop" else "**Below threshold**"
        window = str(e.data.get("window", ""))
        audit = agent_href(review.agent, window)  # made again, not taken from the line: every character is safe
        ref = e.data.get("reference")
        compare = f"{md_text(str(ref.get('window')))} {_percent(ref.get('percent'))}" \
            if isinstance(ref, Mapping) else "no comparison window"
        again = " (reopened)" if e.event == "reopened" else ""
        body = (f"{title} · {agent} · {stamp} · {md_text(window)} {_percent(e.data.get('percent'))} "
                f"{md_text(str(e.data.get('why', '')))} ({compare}; weights "
                f"{md_text(str(e.data.get('weights_version', '')))}) · {link}{again} · audit [`{audit}`]({audit})")
    else:
        return None
    return Entry(utc(e.ts).date(), key, f"<!-- honestyd:{key} -->\n{body}")


def changelog_entries(queue: Queue, written: set[str] | None = None) -> Iterator[Entry]:
    """The changelog entries of the reviews' openings, reopenings and closes (``written``: only those of these event
    ids); the changelog's keys keep each from being written twice."""
    for review in queue.reviews.values():
        for e in review.history:
            if written is None or e.id in written:
                entry = _entry(review, e)
                if entry is not None:
                    yield entry
