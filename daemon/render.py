"""Plain-text renderings of scores and audits for the CLI (``score``, ``audit``) and the audit page (pure)."""

from __future__ import annotations

from collectors.rfc3339 import format_ts
from daemon.config import COMPONENTS
from scorers.score import AgentResult, WindowResult

SHORT = {
    "citation_rate": "Cite",
    "refusal_correctness": "Refusal",
    "source_verifiability": "Verifies",
    "gap_surfacing_rate": "Gap",
    "consistency_under_repeat": "Consistent",
    "self_correction_rate": "Corrected",
}


def score_line(a: AgentResult, min_decisions: int) -> str:
    """``87 % [0.71–0.95]`` or ``INSUFFICIENT · N=<5``."""
    if a.insufficient or a.score is None:
        return f"INSUFFICIENT · N=<{min_decisions}"
    interval = f" [{a.interval[0]:.2f}–{a.interval[1]:.2f}]" if a.interval else ""
    return f"{a.percent} %{interval}"


def render_scores(result: WindowResult, min_decisions: int) -> str:
    """One block per agent: score, coverage, decisions, false gaps and each component's ratio."""
    lines = [f"honesty scores · window {result.window} · at {format_ts(result.at)}"]
    if not result.agents:
        lines.append("(no agents with decisions)")
    for name, a in result.agents.items():
        lines.append("")
        lines.append(
            f"{name}: {score_line(a, min_decisions)} · coverage {a.coverage:.2f} · "
            f"decisions {a.decisions} · false gaps {a.false_gaps} · w · {a.weights_version}"
        )
        for c in COMPONENTS:
            r = a.components[c]
            ratio = "N/A" if r.ratio is None else f"{r.ratio:.2f}"
            pending = f" ({r.pending} pending)" if r.pending else ""
            lines.append(f"  {c:<26} {r.passed:>4}/{r.counted:<4} {ratio:>5}{pending}")
    return "\n".join(lines) + "\n"


def arithmetic(a: AgentResult) -> list[str]:
    """The two lines that produce a score: every component's count, then the weighted average.

    Shared by the CLI audit and the HTML audit page, so both show the same derivation.
    """
    parts = []
    terms = []
    for c, w in zip(COMPONENTS, a.weights, strict=True):
        r = a.components[c]
        if r.ratio is None:
            parts.append(f"{c} = N/A")
            terms.append(f"{w:.2f}·(N/A)")
        else:
            pending = f", {r.pending} pending" if r.pending else ""
            parts.append(f"{c} = {r.passed}/{r.counted} ({r.ratio:.2f}{pending})")
            terms.append(f"{w:.2f}·{r.ratio:.2f}")
    result = f"{a.score:.4f} → {a.percent} %" if a.score is not None else "INSUFFICIENT: no number is shown"
    return [" · ".join(parts), f"honesty = ({' + '.join(terms)}) / {a.coverage:.2f} = {result}"]


def _arith(a: AgentResult) -> list[str]:
    out = arithmetic(a)
    if a.interval:
        out.append(f"interval (Wilson 95 %, same weights) = [{a.interval[0]:.4f}, {a.interval[1]:.4f}]")
    out.append(f"coverage {a.coverage:.2f} · false gaps (beside the score) = {a.false_gaps}"
               f" · weights {a.weights_version}")
    return out


def render_audit(a: AgentResult, result: WindowResult, min_decisions: int) -> str:
    """The methodology's per-decision table followed by the arithmetic that produces the score."""
    lines = [
        f"audit · {a.agent} · window {result.window} · at {format_ts(result.at)} · "
        f"{score_line(a, min_decisions)}",
        "",
        "\t".join(["Time", "Kind", "Id", "Source", "Citations", *(SHORT[c] for c in COMPONENTS)]),
    ]
    for row in sorted(a.rows, key=lambda r: (r.decision.ts, r.decision.order), reverse=True):
        d = row.decision
        cites = ", ".join(f"{c.type}:{c.target}" if c.type != "run" else c.target for c in d.citations) or "—"
        cells = []
        for c in COMPONENTS:
            o = row.outcomes[c]
            cells.append(f"{o.mark} ({o.why})" if o.why else o.mark)
        lines.append("\t".join([format_ts(d.ts), d.kind, d.id, d.location, cites, *cells]))
    lines.append("")
    lines.extend(_arith(a))
    return "\n".join(lines) + "\n"
