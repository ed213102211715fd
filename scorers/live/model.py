"""The live model: records in, per-window results out, re-running a rule only where its outcome can have changed.

:class:`LiveModel` puts the parts of scorers/live/ together (each a mixin over the state of base.py; sums.py runs
the rules over indexes.py's lookups) and holds what spans them: the evaluation at a time ``T``, the rebuild when the
clock steps back, and a reload of the config.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from collectors.records import Event
from scorers.live.base import DAWN
from scorers.live.eviction import Eviction
from scorers.live.invalidation import Invalidation
from scorers.live.records import ById, sorted_by_key, ts_of
from scorers.live.review import Review
from scorers.live.sums import Split, Summing
from scorers.live.visibility import Visibility
from scorers.rule import Rule
from scorers.rules import RULES
from scorers.score import AgentResult, DecisionRow, WindowResult, score_agent, window_width
from scorers.spec import ScoringConfig, outcome_part


class LiveModel(Visibility, Invalidation, Eviction, Summing, Review):
    """Records in, per-window results out, re-evaluating only what changed. Not thread-safe: one owner.

    ``rules``: the component rules by name (:data:`scorers.rules.RULES`); the model reads only what they declare.
    """

    def __init__(self, config: ScoringConfig, *, evict: bool = False, rules: Mapping[str, Rule] = RULES) -> None:
        super().__init__(config, evict=evict, rules=rules)

    def reconfigure(self, config: ScoringConfig) -> bool:
        """Take ``config`` when every kept outcome stays right under it (:func:`~scorers.spec.outcome_part`
        unchanged: a change of weights, windows, the floor, z, alert levels or what the scorers never read); the
        windows are summed afresh at the next evaluation. False, and nothing changed, when the rules would decide
        differently: build a new model.
        """
        if outcome_part(config) != outcome_part(self.config):
            return False
        if self.evicted_to > DAWN and self.at - config.scoring.longest_window < self.evicted_to:
            return False  # a longer window reaches records already let go
        self.config = config
        self._results.clear()  # sums summarised with the old weights, or for windows that may be gone
        return True

    # --- evaluation

    def evaluate(self, at: datetime, *, split: Split | None = None) -> dict[str, WindowResult]:
        """Every configured window at ``at``: the same results as :func:`scorers.score.evaluate`, without rows.
        ``split``: when this evaluation rebuilds the model, what may work out part of its outcomes elsewhere (see
        :meth:`rerun_all`)."""
        horizon = self._horizon(at)
        if self._fresh or at < self.at:
            self._rebuild(at, horizon)
        else:
            self._advance(at)
            if horizon is not None:
                self._evict(horizon)
        self.summed = 0
        all_dirty, self._all_dirty = self._all_dirty, False
        dirty, self._dirty = self._dirty, ById()
        if all_dirty:  # a rebuild: every decision runs once (those marked since among them)
            self.rerun_all(split)
            return {name: self._window(name, width) for name, width in self.config.scoring.windows}
        self.evaluated = len(dirty)
        by_agent: dict[str, list[Event]] = defaultdict(list)
        for e in dirty.values():
            by_agent[e.agent].append(e)
        for agent, marked in by_agent.items():
            a = self._agents.get(agent)
            if a is None:
                continue  # departed since it was marked
            if len(marked) * 16 < len(a.events):
                for e in marked:
                    i = a.index(e)
                    if i is not None:
                        self._reevaluate(e, a, i)
            else:  # many of this agent's decisions: one pass, no searches
                for i, e in enumerate(a.events):
                    if id(e) in dirty:
                        self._reevaluate(e, a, i)
        return {name: self._window(name, width) for name, width in self.config.scoring.windows}

    def latest_decisions(self, agents: Iterable[str]) -> dict[str, datetime]:
        """The time of each agent's latest decision up to the last evaluation time (none: the agent is left out)."""
        out: dict[str, datetime] = {}
        for agent in agents:
            a = self._agents.get(agent)
            i = 0 if a is None else bisect.bisect_right(a.events, self.at, key=ts_of)
            if a is not None and i:
                out[agent] = a.events[i - 1].ts
        return out

    def agent_result(self, agent: str, window: str) -> AgentResult | None:
        """One agent's result at the last evaluation time, with every audit row (built now, not kept)."""
        a = self._agents.get(agent)
        if a is None:
            return None
        width = window_width(self.config, window)
        lo, hi = a.between(self.at - width, self.at)
        rules = self.rules
        rows = [DecisionRow(d, {n: rule.evaluate(d, self, width) for n, rule in rules.items()})
                for d in a.events[lo:hi]]
        return score_agent(agent, rows, self.config, rules)

    def _rebuild(self, at: datetime, horizon: datetime | None) -> None:
        """Index every stored record afresh for ``at`` (first evaluation, or the clock went back), letting go of
        those up to ``horizon`` first (see eviction.py) when that is due."""
        events = self._stored_events()
        if horizon is not None:
            # An id goes with all its records: it has one dated up to the horizon and none after. Built from the
            # old records only (a map of every id to its newest time would cost a start where nothing is that old).
            old = {e.id for e in events if e.ts <= horizon}
            if old:
                old -= {e.id for e in events if e.ts > horizon and e.id in old}
                events = [e for e in events if e.id not in old]
            for rid in old:
                self._evicted.add(rid)
            self._let_go_of_checks_and_file_times(horizon)
            self.evicted_to = horizon
        labels = self._label_columns, self._labels_to_file_again()
        files = dict(self._files.files)
        checks = self._all_checks
        evicted, evicted_to, links = self._evicted, self.evicted_to, self._files.links
        elsewhere = self.let_go_elsewhere, self.let_go_elsewhere_count
        self.__init__(self.config, evict=self.evicts, rules=self.rules)  # type: ignore[misc]
        self._evicted, self.evicted_to, self._files.links = evicted, evicted_to, links
        self.let_go_elsewhere, self.let_go_elsewhere_count = elsewhere
        self._fresh = False
        self.at = at
        self._bulk = True
        self._all_dirty = True
        self._show_sorted(sorted_by_key(e for e in events if e.ts <= at))
        for e in events:
            if e.ts > at:
                if isinstance(e, Event) and e.line is None:
                    self._file_document(e)
                heapq.heappush(self._hidden, (e.ts, next(self._seq), e))
                self._hidden_ids[e.id] += 1
        # Everything is dirty already: labels, checks and files need no per-record invalidation.
        self._file_labels_again(*labels)
        self.add_checks(checks)
        for path, f in files.items():
            self._put_file(path, f)
        self._bulk = False
        self._advance(at)

