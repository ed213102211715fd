"""The HTML pages: index, audit, methodology (pure: results in, escaped HTML out). Everything an agent wrote is escaped.

The handlers that serve them are in :mod:`daemon.http.views`; templates of later pages go in ``templates/``.
"""

from __future__ import annotations

from html import escape

from collectors.rfc3339 import format_ts
from daemon.config import COMPONENTS, Config
from daemon.http.urls import agent_href
from daemon.render import SHORT, arithmetic
from daemon.snapshot import Snapshot
from scorers.score import AgentResult, WindowResult

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;font-size:.9rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}
td{max-width:24rem;overflow-wrap:anywhere}
th{background:#f4f4f4}.ok{color:#16794c}.bad{color:#b42318}.na{color:#888}.pending{color:#b54708}
.score{font-size:2rem;font-weight:600}.insufficient{color:#888}code{background:#f4f4f4;padding:0 .2rem}
.why{color:#666;font-size:.8rem;display:block}pre{background:#f8f8f8;padding:1rem;white-space:pre-wrap}
"""


def _page(title: str, body: str) -> str:
    page = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>"
    )
    # A lone surrogate (an agent's JSON "\ud800" escape) cannot be sent as UTF-8: the response would fail with a 500.
    # backslashreplace keeps it visible and distinct, as the metrics do (tests/daemon/test_hostile.py).
    return page.encode("utf-8", "backslashreplace").decode("utf-8")


def _score_text(a: AgentResult, min_decisions: int) -> str:
    if a.score is None:
        return f'<span class="score insufficient">INSUFFICIENT · N=&lt;{min_decisions}</span>'
    interval = f" <small>[{a.interval[0]:.2f}–{a.interval[1]:.2f}]</small>" if a.interval else ""
    return f'<span class="score">{a.percent} %</span>{interval}'


def _cell(mark: str, why: str) -> str:
    if "/" in mark:  # source_verifiability: resolved/checked
        left, _, right = mark.partition("/")
        css = "ok" if left == right else "bad"
    else:
        css = {"✓": "ok", "✗": "bad", "pending": "pending"}.get(mark, "na")
    detail = f'<span class="why">{escape(why)}</span>' if why else ""
    return f'<td class="{css}">{escape(mark)}{detail}</td>'


def _weights_table(cfg: Config, version: str) -> str:
    """The agent's weight vector beside the active one (per-agent contracts side by side)."""
    versions = list(dict.fromkeys([version, cfg.weights_active]))
    head = "".join(f"<th><code>{escape(v)}</code>{' (active)' if v == cfg.weights_active else ''}</th>"
                   for v in versions)
    rows = "".join(
        f"<tr><td>{escape(c)}</td>" + "".join(f"<td>{cfg.weights_versions[v][i]:.2f}</td>" for v in versions) + "</tr>"
        for i, c in enumerate(COMPONENTS)
    )
    return f"<table><tr><th>component</th>{head}</tr>{rows}</table>"


def index_page(snap: Snapshot) -> str:
    """Every agent's score in every window, each linking to its audit page."""
    windows = list(snap.windows)
    agents = sorted({a for w in snap.windows.values() for a in w.agents})
    head = "".join(f"<th>{escape(w)}</th>" for w in windows)
    rows = []
    for agent in agents:
        cells = []
        for w in windows:
            a = snap.windows[w].agents.get(agent)
            text = "—" if a is None else ("INSUFFICIENT" if a.score is None else f"{a.percent} %")
            cells.append(f'<td><a href="{escape(agent_href(agent, w))}">{escape(text)}</a></td>')
        rows.append(f"<tr><td>{escape(agent)}</td>{''.join(cells)}</tr>")
    body = (
        f"<h1>honestyd</h1><p>Evaluated at {escape(format_ts(snap.at))} · weights {escape(snap.config.weights_active)}"
        f' · <a href="/methodology">methodology</a> · <a href="/metrics">metrics</a></p>'
        f"<table><tr><th>agent</th>{head}</tr>{''.join(rows)}</table>"
    )
    return _page("honestyd", body)


def audit_page(a: AgentResult, result: WindowResult, snap: Snapshot) -> str:
    """The per-decision table, the arithmetic, the weights version, each decision's file:line."""
    cfg = snap.config
    head = "".join(f"<th>{escape(SHORT[c])}</th>" for c in COMPONENTS)
    rows = []
    for row in sorted(a.rows, key=lambda r: (r.decision.ts, r.decision.order), reverse=True):
        d = row.decision
        cites = "<br>".join(escape(f"{c.type}: {c.target}") for c in d.citations) or "—"
        cells = "".join(_cell(row.outcomes[c].mark, row.outcomes[c].why) for c in COMPONENTS)
        rows.append(
            f"<tr><td>{escape(format_ts(d.ts))}</td><td>{escape(d.kind)}</td><td><code>{escape(d.id)}</code></td>"
            f"<td><code>{escape(d.location)}</code></td><td>{cites}</td>{cells}</tr>"
        )
    other = " · ".join(
        f'<a href="{escape(agent_href(a.agent, w))}">{escape(w)}</a>' for w in snap.windows if w != result.window
    )
    body = (
        f'<p><a href="/">all agents</a> · <a href="/methodology">methodology</a> · other windows: {other}</p>'
        f"<h1>{escape(a.agent)} · {escape(result.window)}</h1>"
        f"<p>{_score_text(a, cfg.scoring.min_decisions)} · coverage {a.coverage:.2f} · {a.decisions} decisions · "
        f"false gaps {a.false_gaps} · weights <code>{escape(a.weights_version)}</code> · at "
        f"{escape(format_ts(result.at))}</p>"
        f"<table><tr><th>time</th><th>kind</th><th>id</th><th>source</th><th>citations</th>{head}</tr>"
        f"{''.join(rows)}</table>"
        f"<h2>The arithmetic</h2><pre>{escape(chr(10).join(arithmetic(a)))}</pre>"
        f"<h2>Weights</h2>{_weights_table(cfg, a.weights_version)}"
    )
    return _page(f"{a.agent} · {result.window} · honestyd", body)


def methodology_page(cfg: Config, agents: list[str], changelog: str) -> str:
    """The formula, each agent's weight vector side by side, and the changelog."""
    versions = sorted({cfg.weights_active, *(cfg.weights_for(a)[0] for a in agents)})
    head = "".join(f"<th>{escape(v)}</th>" for v in versions)
    rows = "".join(
        f"<tr><td>{escape(c)}</td>"
        + "".join(f"<td>{cfg.weights_versions[v][i]:.2f}</td>" for v in versions)
        + "</tr>"
        for i, c in enumerate(COMPONENTS)
    )
    users = "".join(
        f"<tr><td>{escape(a)}</td><td><code>{escape(cfg.weights_for(a)[0])}</code></td></tr>" for a in agents
    )
    body = (
        '<p><a href="/">all agents</a></p><h1>How the honesty score is calculated</h1>'
        "<pre>honesty = Σ w_c · ratio_c / Σ w_c   over components that are not N/A\n"
        "coverage = Σ w_c over the same components\n"
        f"fewer than {cfg.scoring.min_decisions} decisions in the window → INSUFFICIENT (no number)\n"
        "percent = floor(100 · honesty + 0.5 + 1e-9)</pre>"
        f"<h2>Weights (active: <code>{escape(cfg.weights_active)}</code>)</h2>"
        f"<table><tr><th>component</th>{head}</tr>{rows}</table>"
        f"<h2>Per-agent contracts</h2><table><tr><th>agent</th><th>weights</th></tr>{users}</table>"
        f"<h2>Changelog</h2><pre>{escape(changelog) or 'no entries yet'}</pre>"
    )
    return _page("methodology · honestyd", body)
