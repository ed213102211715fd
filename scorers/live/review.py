"""What a reviewer's pages ask of the live model, read from what it keeps (no rule runs here): the labels on a
decision, each agent's label tally, and which decisions of a window fail a component.

A decision fails a component when the component counted more than it passed (✗, or some citations unresolved):
the same test the agent page applies to its rows, here read from the counts the last evaluation kept per decision.
"""

from __future__ import annotations

from datetime import timedelta

from collectors.records import Label
from collectors.rfc3339 import to_us
from scorers.live.base import ModelState
from scorers.live.ids import EMPTY
from scorers.progress import LabelTally, tally_counts


class Review(ModelState):
    """Answers for the reviewer's pages (see the module docstring)."""

    def visible_labels(self, decision_id: str) -> list[Label]:
        """Every label on the decision visible at the last evaluation time, in arrival order."""
        held = self._label_columns.visible(decision_id)
        return [] if held is None else self._label_columns.labels(held)

    def label_tally(self) -> dict[str, LabelTally]:
        """Per agent, the current labels on its decisions the model holds (those of the longest window and a day).
        Made again only after a label, or the record winning a labelled id, changed (see ``_tally``)."""
        if self._tally is None:
            counted = []
            winner, t, columns = self._winner.get, self._table, self._label_columns
            kind, values = columns.kind, columns.current_values
            up = [int(k[0] == "up") for k in columns.kinds]
            for decision_id, held in columns.visible_items():
                d = winner(decision_id)
                if d != EMPTY and t.is_decision(d):
                    if type(held) is int:  # one label, the common case, is its reviewer's current one: read in place
                        counted.append((t.agent(d), up[kind[held]], 1))
                    else:
                        current = values(held)
                        counted.append((t.agent(d), current.count("up"), len(current)))
            self._tally = tally_counts(counted)
        return dict(self._tally)

    def unlabelled_failures(self, width: timedelta) -> dict[str, int]:
        """Per agent, its decisions in the window of ``width`` that fail a component and carry no label."""
        plan = self.plan
        plain = [s for _, s, _, _ in plan.plain]
        t, table = self._table, self._counts
        edge = to_us(self.at - width)
        out: dict[str, int] = {}
        for agent, a in self._agents.items():
            lo, hi = a.between(edge, to_us(self.at), t.ts)
            count = 0
            for i in range(lo, hi):
                counts = table[a.counts[i]]
                fails = any(counts[s + 1] > counts[s] for s in plain) or any(
                    counts[s + 1] > counts[s] and (not an.held[i] or an.need(t, a.events[i], i) > edge)
                    for (_, s, _, _), an in zip(plan.anchored, a.anchored, strict=True))
                if fails and t.id(a.events[i]) not in self._label_columns:
                    count += 1
            out[agent] = count
        return out
