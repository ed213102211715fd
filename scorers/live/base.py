"""The live model's state, shared by the parts of scorers/live/ (each part is a mixin of :class:`LiveModel`).

Every attribute is made here, with what it holds; the methods one part offers the others are declared here too, so
each part reads as a whole on its own. Every stored record is a slot of the :class:`~scorers.live.table.Table`, and
every index holds slots. Each slot lives in exactly one of: the winners of their ids or the records shadowed behind
them (visible, ``ts ≤ T``), the hidden heap (``ts > T``), or the records loaded before the first evaluation.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from collectors.records import CheckResult, Event, Label
from scorers.live.ids import IdIndex
from scorers.live.labels import HeldLabels
from scorers.live.plan import Plan
from scorers.live.records import SEPARATOR, IdHashes, Vocabulary
from scorers.live.table import Table
from scorers.lookups import FileIndex, FileState
from scorers.progress import LabelTally
from scorers.rule import Rule
from scorers.score import AgentResult
from scorers.spec import ScoringConfig

if TYPE_CHECKING:
    from scorers.live.agents import Agent

NEVER = datetime.max.replace(tzinfo=UTC)
DAWN = datetime.min.replace(tzinfo=UTC)
#: What the width-independent rules are given for the width (they ignore it).
NO_WIDTH = timedelta(0)
#: The typecode of a column of slots.
SLOTS = "i"
#: The agents' columns of counts take two bytes a decision while the model's counts table has at most this many.
COUNTS_FIT = 0x10000


def slots_in(held: int | list[int] | None) -> list[int]:
    """The slots of a document's decisions as ``_documents`` holds them (None: none)."""
    if held is None:
        return []
    return held if isinstance(held, list) else [held]


class ModelState:
    """Everything the model holds (see each attribute); not thread-safe: one owner."""

    def __init__(self, config: ScoringConfig, *, evict: bool, rules: Mapping[str, Rule]) -> None:
        self.config = config
        self.rules = rules
        self.plan = Plan.of(rules, config)
        self.at = DAWN
        #: Let go of the records behind every window (eviction.py); then records must come with a lookup.
        self.evicts = evict
        #: Every record with a time up to this may have been let go; their ids are in _evicted (or, once the owner
        #: moved them there, where let_go_elsewhere asks).
        self.evicted_to = DAWN
        self._evicted = IdHashes()
        #: Where the ids let go are asked about once they left _evicted (the daemon's store, migration 013): called
        #: with an id and this model's horizon. Set by the owner around the calls that may ask, never kept (pickled).
        self.let_go_elsewhere: Callable[[str, datetime], bool] | None = None
        #: How many ids that place holds (for size()).
        self.let_go_elsewhere_count = 0
        self._readmitting = False
        #: The latest visible conclusive check per (type, target), however old (the lookup applies the maximum age).
        self.latest_checks: dict[tuple[str, str], CheckResult] = {}
        self._decision_kinds = frozenset(config.decision_kinds)
        self._state_kinds = frozenset(config.state_change_kinds)
        ph = config.phrases
        vocabulary = [*ph.reason, *ph.alternatives, *ph.gap, *ph.acknowledgement, *(s.phrase for s in config.signals)]
        #: None keeps texts whole: a phrase with a line break could span two reduced phrases.
        self._vocabulary = None if any(SEPARATOR in p for p in vocabulary) else Vocabulary(vocabulary)
        #: Every record held, by slot (scorers/live/table.py).
        self._table = Table(self._vocabulary, self._decision_kinds)
        self._table.threads.remember_all()  # until the first evaluation: a load's threads (see Texts)
        #: Values computed once and shared (prompt keys); the counts and contributions tables below.
        self._shared: dict[Any, Any] = {}
        #: Each distinct tuple of a decision's counts (the first: all zero), and each distinct contribution of an
        #: anchored outcome; the agents' columns hold their positions.
        self._counts: list[tuple[int, ...]] = [self.plan.zero]
        self._count_at: dict[tuple[int, ...], int] = {self.plan.zero: 0}
        self._contributions: list[tuple[int, int, int, int]] = []
        self._contribution_at: dict[tuple[int, int, int, int], int] = {}
        self._seq = itertools.count()
        self._fresh = True
        # --- visibility.py
        #: The slot winning each id (spec 1.1: the first record of the id in read order).
        self._winner = IdIndex(self._table.ids)
        self._shadowed: dict[str, list[int]] = {}
        #: (time in microseconds, arrival, slot) of the records dated after T.
        self._hidden: list[tuple[int, int, int]] = []
        #: How many records in _hidden carry each id: holds_id answers for them without walking the heap.
        self._hidden_ids: Counter[str] = Counter()
        self._loaded: array[int] = array(SLOTS)  # arrived before the first evaluation, in no order
        self._removed: set[int] = set()  # hidden events removed before they became visible
        #: The Markdown decisions of each document: the one slot while it is alone (most documents hold one), a list
        #: past that (see :func:`slots_in`).
        self._documents: dict[str, int | list[int]] = {}
        #: Every label held, as columns (scorers/live/labels.py), with the visible ones on each decision id (its
        #: ``visible``: the one slot while there is one, as most decisions carry, a tuple of slots while few, a list
        #: past that).
        self._label_columns = HeldLabels()
        #: The ids with visible labels that no record held here carries, and how many visible labels are on them:
        #: labels on a decision honestyd never saw (a typo, another system's id), kept as the store keeps them and
        #: counted.
        self._orphans: set[str] = set()
        self.unmatched_labels = 0
        #: The label tally as last computed (review.py); None once a label, or the record winning a labelled id,
        #: changed: most evaluations follow events alone, and the tally walks every label held.
        self._tally: dict[str, LabelTally] | None = None
        #: The slots of labels dated after T, by time (and arrival), and of those added before the first evaluation.
        self._hidden_labels: list[tuple[datetime, int, int]] = []
        self._loaded_labels: array[int] = array("q")
        self._all_checks: list[CheckResult] = []
        self._hidden_checks: list[tuple[datetime, int, CheckResult]] = []
        #: The file index and the symlinks inside the root (the index is by canonical path).
        self._files = FileIndex()
        #: Times after T at which a file's entry changes as known (created, modified, deleted), with its path.
        self._file_times: list[tuple[datetime, str]] = []
        # --- indexes.py: over the visible winners
        self._agents: dict[str, Agent] = {}
        #: Times (microseconds) of the visible state changes, and of the visible decisions with a prompt key (the
        #: ones a state change can concern), sorted.
        self._state_times: array[int] = array("q")
        self._prompted_times: array[int] = array("q")
        #: The decisions of each (agent, prompt key), in (ts, read order).
        self._prompts: dict[tuple[str, str], array[int]] = {}
        #: Decisions by the canonical path each path they name resolves to (plan.by_path), once per path.
        self._by_path: dict[str, array[int]] = {}
        #: The decisions a rule's ``signals`` selects.
        self._signal_claims: array[int] = array(SLOTS)
        # --- invalidation.py and sums.py
        self._dirty: set[int] = set()
        #: Every decision is to be re-run (a rebuild): no entry per decision in _dirty, a million of them at a start.
        self._all_dirty = False
        #: (microseconds, arrival, slot): when cached outcomes stop being valid by time alone, with their decisions.
        self._expiry: list[tuple[int, int, int]] = []
        self._results: dict[tuple[str, str], tuple[tuple[Any, ...], AgentResult]] = {}
        #: Arrivals mark nothing while true: a rebuild marks every decision at once (_all_dirty).
        self._bulk = False
        #: Decisions the last evaluation re-ran the rules for, and (agent, window) sums it recomputed (figures for
        #: the benchmark and the logs: they show the work follows the change, not the history).
        self.evaluated = 0
        self.summed = 0

    def _count_index(self, counts: tuple[int, ...]) -> int:
        """The position of ``counts`` in the counts table (added when new)."""
        k = self._count_at.get(counts)
        if k is None:
            k = self._count_at[counts] = len(self._counts)
            self._counts.append(counts)
            if k == COUNTS_FIT:  # past two bytes: every agent's column of counts widens
                for a in self._agents.values():
                    a.counts = array("I", a.counts)
        return k

    def _contribution_index(self, contribution: tuple[int, int, int, int]) -> int:
        """The position of ``contribution`` in the contributions table (added when new)."""
        k = self._contribution_at.get(contribution)
        if k is None:
            k = self._contribution_at[contribution] = len(self._contributions)
            self._contributions.append(contribution)
        return k

    if TYPE_CHECKING:
        # What each part offers the others.

        # visibility.py
        def _let_go(self, record_id: str) -> bool: ...
        def _show(self, s: int) -> None: ...
        def _file_document(self, s: int) -> None: ...
        def _unfile_document(self, s: int) -> None: ...
        def add_labels(self, labels: Iterable[Label]) -> None: ...
        def add_checks(self, checks: Iterable[CheckResult]) -> None: ...
        def records(self) -> list[Event]: ...

        # indexes.py
        def _index(self, s: int) -> None: ...
        def _index_agent(self, agent: str, slots: Sequence[int], prompt_keys: Sequence[str | None]) -> None: ...
        def _unindex(self, s: int) -> None: ...
        def _unfile(self, s: int, e: Event) -> None: ...
        def _forget_agent(self, agent: str) -> None: ...
        def _changed(self, a: Agent, i: int) -> None: ...
        def _prompt_key(self, prompt: str | None) -> str | None: ...
        def _path_key(self, path: str) -> str: ...
        def _next_same_prompt(self, s: int) -> int | None: ...
        def _put_file(self, path: str, f: FileState | None) -> None: ...

        # invalidation.py
        def _touch(self, s: int) -> None: ...
        def _touch_neighbours(self, s: int, e: Event, a: Agent) -> None: ...
        def _touch_state_change(self, us: int) -> None: ...
        def _touch_path(self, path: str, created: set[datetime]) -> None: ...
        def _touch_citing(self, keys: set[tuple[str, str]]) -> None: ...
        def _touch_relinked(self, named: Iterable[int]) -> None: ...

        # eviction.py
        def _let_go_of_checks_and_file_times(self, horizon: datetime) -> None: ...
