"""The live model: records in, per-window results out, re-running a rule only where its outcome can have changed.

:class:`LiveModel` puts the parts of scorers/live/ together (each a mixin over the state of base.py; sums.py runs
the rules over indexes.py's lookups) and holds what spans them: the evaluation at a time ``T``, the rebuild when the
clock steps back, and a reload of the config.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from array import array
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from collectors.rfc3339 import to_us
from scorers.live.base import DAWN, SLOTS
from scorers.live.eviction import Eviction
from scorers.live.ids import IdIndex
from scorers.live.invalidation import Invalidation
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
        dirty, self._dirty = self._dirty, set()
        if all_dirty:  # a rebuild: every decision runs once (those marked since among them)
            self.rerun_all(split)
            return {name: self._window(name, width) for name, width in self.config.scoring.windows}
        self.evaluated = len(dirty)
        t = self._table
        by_agent: dict[str, list[int]] = defaultdict(list)
        for s in dirty:
            if t.live(s) and t.is_decision(s):
                by_agent[t.agent(s)].append(s)
        for agent, marked in by_agent.items():
            a = self._agents.get(agent)
            if a is None:
                continue  # departed since it was marked
            if len(marked) * 16 < len(a.events):
                for s in marked:
                    i = a.index(s, t)
                    if i is not None:
                        self._reevaluate(s, a, i)
            else:  # many of this agent's decisions: one pass, no searches
                for i, s in enumerate(a.events):
                    if s in dirty:
                        self._reevaluate(s, a, i)
        return {name: self._window(name, width) for name, width in self.config.scoring.windows}

    def latest_decisions(self, agents: Iterable[str]) -> dict[str, datetime]:
        """The time of each agent's latest decision up to the last evaluation time (none: the agent is left out)."""
        out: dict[str, datetime] = {}
        t = self._table
        for agent in agents:
            a = self._agents.get(agent)
            i = 0 if a is None else bisect.bisect_right(a.events, to_us(self.at), key=t.ts.__getitem__)
            if a is not None and i:
                out[agent] = t.time(a.events[i - 1])
        return out

    def agent_result(self, agent: str, window: str) -> AgentResult | None:
        """One agent's result at the last evaluation time, with every audit row (built now, not kept)."""
        a = self._agents.get(agent)
        if a is None:
            return None
        width = window_width(self.config, window)
        t = self._table
        lo, hi = a.between(to_us(self.at - width), to_us(self.at), t.ts)
        rules = self.rules
        rows = []
        for s in a.events[lo:hi]:
            d = t.event(s)
            rows.append(DecisionRow(d, {n: rule.evaluate(d, self, width) for n, rule in rules.items()}))
        return score_agent(agent, rows, self.config, rules)

    def _rebuild(self, at: datetime, horizon: datetime | None) -> None:
        """Index every stored record afresh for ``at`` (first evaluation, or the clock went back), letting go of
        those up to ``horizon`` first (see eviction.py) when that is due."""
        t = self._table
        t.threads.forget_recent()
        slots = self._stored_slots()
        if horizon is not None:
            slots = self._let_go_of_ids_before(slots, horizon)
        labels = self._label_columns, self._labels_to_file_again()
        files = dict(self._files.files)
        checks = self._all_checks
        evicted, evicted_to, links = self._evicted, self.evicted_to, self._files.links
        elsewhere = self.let_go_elsewhere, self.let_go_elsewhere_count
        self.__init__(self.config, evict=self.evicts, rules=self.rules)  # type: ignore[misc]
        self._table, self._winner = t, IdIndex(t.ids, len(slots))
        self._evicted, self.evicted_to, self._files.links = evicted, evicted_to, links
        self.let_go_elsewhere, self.let_go_elsewhere_count = elsewhere
        self._fresh = False
        self.at = at
        self._bulk = True
        self._all_dirty = True
        self._show_all(slots)
        # Everything is dirty already: labels, checks and files need no per-record invalidation.
        self._file_labels_again(*labels)
        self.add_checks(checks)
        self._put_files_again(files)
        self._bulk = False
        self._advance(at)

    def _stored_slots(self) -> array[int]:
        """Every slot still stored (those removed while hidden are let go here). The slots loaded are taken, not
        copied: the rebuild empties the model next, and a first evaluation's million slots would be held twice."""
        t, removed = self._table, self._removed
        held, self._loaded = self._loaded, array(SLOTS)
        held.extend(self._held_slots())
        if not removed:
            return held
        for s in removed:
            t.release(s)
        return array(SLOTS, (s for s in held if s not in removed))

    def _let_go_of_ids_before(self, slots: array[int], horizon: datetime) -> array[int]:
        """``slots`` without the records of the ids whose every record is dated up to ``horizon`` (let go: their
        slots go back to the table, their ids are noted as let go)."""
        t = self._table
        ts, until = t.ts, to_us(horizon)
        # An id goes with all its records: it has one dated up to the horizon and none after. Built from the old
        # records only (a map of every id to its newest time would cost a start where nothing is that old).
        old = {t.id(s) for s in slots if ts[s] <= until}
        if old:
            old -= {rid for s in slots if ts[s] > until and (rid := t.id(s)) in old}
        if old:
            kept = array(SLOTS)
            for s in slots:
                if ts[s] <= until and t.id(s) in old:
                    t.release(s)
                else:
                    kept.append(s)
            slots = kept
        for rid in old:
            self._evicted.add(rid)
        self._let_go_of_checks_and_file_times(horizon)
        self.evicted_to = horizon
        return slots

    def _show_all(self, slots: array[int]) -> None:
        """Show a rebuild's records at once (``slots``, emptied on the way): those after T hidden, each id's winner
        found (spec 1.1: the first in read order; a replay let go), then each agent's winners indexed in (ts, read
        order) without a search."""
        self._hide_later(slots)
        self._find_winners(slots)
        t = self._table
        for s in slots:
            if t.live(s) and t.is_markdown(s):  # (not a replay let go)
                self._file_document(s)
        del slots[:]  # the winners are indexed from here: the column goes before the agents' columns are made
        # What each record's source says of it, read per source once (Table.kind, .agent, .is_decision per record).
        sources = t.sources.values
        states = bytes(source.kind in self._state_kinds for source in sources)
        by_source = [array(SLOTS) for _ in sources]  # then by agent: a list's item is found for less than a dict's
        state, ts, source_at, line, decides = array("q"), t.ts, t.source, t.line, t.decides
        for s in self._winner.values():
            k = source_at[s]
            if states[k]:
                state.append(ts[s])
            if decides[k] or line[s] == 0:
                by_source[k].append(s)
        by_agent: dict[str, list[array[int]]] = {}
        for source, held in zip(sources, by_source, strict=True):
            if held:
                by_agent.setdefault(source.agent, []).append(held)
        del by_source
        prompt_keys = [self._prompt_key(shape.prompt) for shape in t.shapes.values]  # per shape, not per record
        for agent in sorted(by_agent):
            self._index_agent(agent, t.in_key_order(itertools.chain.from_iterable(by_agent.pop(agent))), prompt_keys)
        self._state_times = array("q", sorted(state))
        self._prompted_times = array("q", sorted(self._prompted_times))

    def _hide_later(self, slots: array[int]) -> None:
        """Put the records of ``slots`` dated after T in the hidden heap and take them out of ``slots`` (in place: a
        copy of the others would be a million slots more while the rebuild runs)."""
        t = self._table
        ts, at = t.ts, to_us(self.at)
        kept = 0
        for s in slots:
            if ts[s] > at:
                if t.is_markdown(s):
                    self._file_document(s)
                heapq.heappush(self._hidden, (ts[s], next(self._seq), s))
                self._hidden_ids[t.id(s)] += 1
            else:
                slots[kept] = s
                kept += 1
        del slots[kept:]

    def _find_winners(self, visible: array[int]) -> None:
        """Each id's winner among ``visible`` (the first in read order), the others shadowed behind it; a replay (a
        record of the same id and read position as one kept) is let go."""
        t, winner, shadowed = self._table, self._winner, self._shadowed
        for s, _ in winner.claim_all(visible):  # the first of each id claims it; the others, in order:
            rid, order = t.id(s), t.order(s)
            w = winner.get(rid)  # (a later one may have taken it from the first since)
            if t.order(w) == order or any(t.order(x) == order for x in shadowed.get(rid, ())):
                t.release(s)
                continue
            if order < t.order(w):
                winner.put(rid, s)
                s = w
            shadowed.setdefault(rid, []).append(s)
