"""The changelog's entries (spec section 5), rendered purely from configurations and snapshots.

Each an :class:`Entry` with a de-duplication key:

* a **methodology** record when the configuration's methodology fingerprint differs from the one last
  recorded (see :mod:`daemon.changelog.methodology`);
* a **score drop** when an agent's review opens or reopens (the dashboard score below ``alert_below``, or more than
  ``drop_alert`` below the agent's own 7 d score), naming and linking the review, and the review's close: those are
  daemon/reviews/views.py's, rendered from the review queue;
* one **daily digest** per date: every agent's score in every configured window.

Nothing here reads the clock: the time is always a parameter. The file they go to is :mod:`daemon.changelog.writer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from daemon import limits
from daemon.changelog.markdown import md_text, percent, plural, utc, utc_stamp
from daemon.changelog.methodology import diff_lines, fingerprint_line, full_lines, methodology_fingerprint
from daemon.config import Config
from daemon.http.urls import agent_href
from daemon.snapshot import Snapshot


@dataclass(frozen=True)
class Entry:
    """One changelog entry: the UTC date it belongs to, its de-duplication key and its Markdown block."""

    date: date
    key: str
    markdown: str


def audit_path(agent: str, window: str) -> str:
    """The API path of an agent's audit for a window, percent-encoded (safe for any agent name)."""
    return agent_href(agent, window)


def methodology_entries(
    old: Config | None, new: Config, now: datetime, *, previous: str | None = None
) -> list[Entry]:
    """The entry recording a methodology change from ``old`` to ``new`` at ``now``; [] when nothing changed.

    ``old`` None (first start, or the previous configuration is unknown) records the full methodology in
    force. ``previous`` (used only when ``old`` is None) is the last recorded fingerprint
    (:func:`last_methodology_fingerprint` of :func:`changelog_text`): when it equals ``new``'s, nothing is
    recorded, so a restart with an unchanged configuration writes nothing. The key holds ``now`` and the
    new fingerprint, so a change back and forth within one day is recorded each time.
    """
    fingerprint = methodology_fingerprint(new)
    was = methodology_fingerprint(old) if old is not None else previous
    if was == fingerprint:
        return []
    stamp = utc_stamp(now)
    key = f"methodology:{stamp}:{fingerprint[:16]}"
    if old is not None:
        title = f"**Methodology change** · {stamp} · fingerprint `{fingerprint[:12]}` (was `{(was or '')[:12]}`)"
        # Every fingerprinted setting has a line above, but never publish a change without saying so.
        lines = diff_lines(old, new) or ["settings outside the listed ones changed"]
    else:
        origin = "first record" if was is None else f"previous fingerprint `{was[:12]}`, its settings unrecorded"
        title = f"**Methodology in force** · {stamp} · fingerprint `{fingerprint[:12]}` ({origin})"
        lines = full_lines(new)
    markdown = "\n".join(
        [
            f"<!-- honestyd:{key} -->",
            fingerprint_line(fingerprint),
            title,
            *(f"- {line}" for line in lines),
        ]
    )
    return [Entry(utc(now).date(), key, markdown)]


def digest_entry(snapshot: Snapshot) -> Entry:
    """The daily digest at ``snapshot.at``: every agent's score in every window, one table row per agent."""
    config = snapshot.config
    floor = config.scoring.min_decisions
    day = utc(snapshot.at).date()
    names = [n for n, _ in config.scoring.windows if n in snapshot.windows]
    names += [n for n in snapshot.windows if n not in names]
    results = [snapshot.windows[n] for n in names]
    listed = {a for r in results for a in r.agents}
    agents = sorted(a for a in listed if a in snapshot.exported)  # [limits]: the agents /metrics shows, no more
    key = f"digest:{day.isoformat()}"
    lines = [
        f"<!-- honestyd:{key} -->",
        f"**Daily digest** · {utc_stamp(snapshot.at)} · weights {md_text(config.weights_active)} (active) · "
        f"floor {plural(floor, 'decision')}",
        "",
    ]
    if not listed:
        lines.append("No agent has a decision in any window.")
    elif agents:
        lines.append("| agent | " + " | ".join(md_text(n) for n in names) + " | weights |")
        lines.append("|---" * (len(names) + 2) + "|")
        for agent in agents:
            cells = [md_text(agent)]
            version = ""
            for r in results:
                a = r.agents.get(agent)
                cells.append("—" if a is None else f"{percent(a, floor)} ({plural(a.decisions, 'decision')})")
                version = version or (a.weights_version if a is not None else "")
            cells.append(md_text(version) or "—")
            lines.append("| " + " | ".join(cells) + " |")
    if len(listed) > len(agents):
        over = snapshot.exported.over_limit()
        lines += ["", f"{plural(len(listed) - len(agents), 'agent')} more scored but not listed here ([limits]:"
                  f" {over[limits.MAX_AGENTS]} beyond max_agents, {over[limits.NAME_TOO_LONG]} with a name over"
                  f" max_agent_name bytes); every agent's scores are in `/v1/agents`."]
    return Entry(day, key, "\n".join(lines))
