"""The changelog's entries (spec section 5), rendered purely from configurations and snapshots.

Three kinds, each an :class:`Entry` with a de-duplication key:

* a **methodology** record when the configuration's methodology fingerprint differs from the one last
  recorded (see :mod:`daemon.changelog.methodology`);
* a **score drop** per (agent, kind, date): the dashboard score below ``alert_below``, or more than
  ``drop_alert`` below the agent's own 7 d score;
* one **daily digest** per date: every agent's score in every configured window.

Nothing here reads the clock: the time is always a parameter. The file they go to is :mod:`daemon.changelog.writer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from daemon import limits
from daemon.changelog.markdown import key_part, md_text, percent, plural, points, utc, utc_stamp
from daemon.changelog.methodology import diff_lines, fingerprint_line, full_lines, methodology_fingerprint
from daemon.config import Config
from daemon.http.urls import agent_href
from daemon.snapshot import Snapshot
from scorers.score import AgentResult, WindowResult

_FLOAT_SLACK = 1e-9  # the same tolerance as the displayed percent (spec 4), so 0.7 is not "below 0.7"


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


def _window_names(snapshot: Snapshot) -> tuple[str | None, str | None]:
    """(dashboard window, comparison window): "24h" else the first; "7d" else the next configured one."""
    names = [name for name, _ in snapshot.config.scoring.windows if name in snapshot.windows]
    if not names:
        return None, None
    dash = "24h" if "24h" in names else names[0]
    rest = [n for n in names if n != dash]
    week = "7d" if "7d" in rest else (rest[0] if rest else None)
    return dash, week


def _agent(result: WindowResult | None, agent: str) -> AgentResult | None:
    return result.agents.get(agent) if result is not None else None


def drop_entries(snapshot: Snapshot) -> list[Entry]:
    """Score-drop entries at ``snapshot.at``: per agent, kind ``below`` and/or ``drop``, once per (agent, kind, date).

    ``below``: the dashboard (24 h) score is under ``alert_below``. ``drop``: it is more than ``drop_alert``
    under the agent's 7 d score. An INSUFFICIENT 24 h result never alerts; nor does ``drop`` against an
    INSUFFICIENT 7 d one.
    """
    dash, week = _window_names(snapshot)
    if dash is None:
        return []
    s = snapshot.config.scoring
    floor = s.min_decisions
    day = utc(snapshot.at).date()
    stamp = utc_stamp(snapshot.at)
    entries = []
    current = snapshot.windows[dash]
    for agent, now in snapshot.exported.items(current.agents):  # [limits]: as many as /metrics shows
        if now.insufficient or now.score is None:
            continue
        ref = _agent(snapshot.windows.get(week) if week else None, agent)
        ref_score = ref.score if ref is not None and not ref.insufficient else None
        reasons = []
        if now.score < s.alert_below - _FLOAT_SLACK:
            reasons.append(("below", f"is below the {points(s.alert_below)} % alert threshold"))
        if week is not None and ref_score is not None and ref_score - now.score > s.drop_alert + _FLOAT_SLACK:
            reasons.append(("drop", f"is more than {points(s.drop_alert)} points below its {md_text(week)} score"))
        for kind, why in reasons:
            key = f"drop:{day.isoformat()}:{kind}:{key_part(agent)}"
            path = audit_path(agent, dash)
            compare = f"{md_text(week)} {percent(ref, floor)}" if week else "no comparison window"
            markdown = (
                f"<!-- honestyd:{key} -->\n"
                f"**Score drop** · {md_text(agent)} · {stamp} · {md_text(dash)} {percent(now, floor)} {why} "
                f"({compare}; weights {md_text(now.weights_version)}) · audit [`{path}`]({path})"
            )
            entries.append(Entry(day, key, markdown))
    return entries


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
