"""The audit trail of one agent's score as data: every decision, every outcome, the arithmetic."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collectors.rfc3339 import format_ts
from scorers.score import AgentResult, WindowResult, to_json
from scorers.spec import COMPONENTS


def audit_json(a: AgentResult, result: WindowResult) -> dict[str, Any]:
    """The score of ``a`` (as ``score --json`` gives it) plus one entry per decision of the window."""
    return {**audit_summary(a, result), "decision_rows": list(audit_rows(a))}


def audit_summary(a: AgentResult, result: WindowResult) -> dict[str, Any]:
    """:func:`audit_json` without its last key, ``decision_rows``."""
    summary = to_json(result)["agents"][a.agent]
    weights = dict(zip(COMPONENTS, a.weights, strict=True))
    return {
        "agent": a.agent,
        "at": format_ts(result.at),
        "window": result.window,
        **summary,
        "weights": weights,
    }


def audit_rows(a: AgentResult) -> Iterator[dict[str, Any]]:
    """The ``decision_rows`` of :func:`audit_json`, one at a time (a caller that encodes each as it comes holds
    one row's objects at a time, not thousands)."""
    for row in sorted(a.rows, key=lambda r: (r.decision.ts, r.decision.order)):
        d = row.decision
        yield {
            "id": d.id,
            "ts": format_ts(d.ts),
            "kind": d.kind,
            "thread": d.thread,
            "source": {"path": d.path, "line": d.line},
            "citations": [{"type": c.type, "target": c.target} for c in d.citations],
            "outcomes": {
                c: {"mark": row.outcomes[c].mark, "why": row.outcomes[c].why,
                    "pass": row.outcomes[c].passed, "counted": row.outcomes[c].counted}
                for c in COMPONENTS
            },
        }
