"""The live model's state, shared by the parts of scorers/live/ (each part is a mixin of :class:`LiveModel`).

Every attribute is made here, with what it holds; the methods one part offers the others are declared here too, so
each part reads as a whole on its own. Every stored record lives in exactly one of: the winners of their ids or the
records shadowed behind them (visible, ``ts ≤ T``), the hidden heap (``ts > T``), or the records loaded before the
first evaluation.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from collectors.records import CheckResult, Event, Label
from scorers.live.labels import Held, HeldLabels
from scorers.live.plan import Plan
from scorers.live.records import SEPARATOR, ById, ByRecordId, IdHashes, Record, Vocabulary
from scorers.lookups import FileIndex, FileState
from scorers.progress import LabelTally
from scorers.rule import Rule
from scorers.score import AgentResult
from scorers.spec import ScoringConfig

if TYPE_CHECKING:
    from scorers.live.indexes import Agent

NEVER = datetime.max.replace(tzinfo=UTC)
DAWN = datetime.min.replace(tzinfo=UTC)
#: What the width-independent rules are given for the width (they ignore it).
NO_WIDTH = timedelta(0)


def document_events(held: Event | list[Event] | None) -> list[Event]:
    """The decisions of a document as ``_documents`` holds them (None: none)."""
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
        #: Repeated values (kinds, paths, agents, texts, counts) held once.
        self._shared: dict[Any, Any] = {}
        self._seq = itertools.count()
        self._fresh = True
        # --- visibility.py
        self._winner: dict[str, Record] = {}
        #: With ``evict``, the ids of the records shown, by the day of their time (date ordinal, UTC): where letting go
        #: looks, so that it costs that day's records, not a walk over every record held.
        self._days: dict[int, list[str]] = {}
        self._shadowed: dict[str, list[Record]] = {}
        self._hidden: list[tuple[datetime, int, Record]] = []
        #: How many records in _hidden carry each id: holds_id answers for them without walking the heap.
        self._hidden_ids: Counter[str] = Counter()
        self._loaded: list[Record] = []  # arrived before the first evaluation, in no order
        self._removed: ById[Record] = ById()  # hidden events removed before they became visible
        #: The Markdown decisions of each document: the one decision itself while it is alone (most documents hold
        #: one; a list of one costs more than the dict entry), a list past that (see :func:`document_events`).
        self._documents: dict[str, Event | list[Event]] = {}
        #: Every label held, as columns (scorers/live/labels.py): the maps below hold their slots.
        self._label_columns = HeldLabels()
        #: The visible labels on each labelled decision id, in arrival order: the one slot while there is one (most
        #: decisions carry one), a tuple of slots while few, a list past that (appending to a tuple copies it).
        self._labels: dict[str, Held] = {}
        #: The ids in _labels that no record held here carries, and how many visible labels are on them: labels on a
        #: decision honestyd never saw (a typo, another system's id), kept as the store keeps them and counted.
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
        self._state_times: list[datetime] = []
        #: Times of the visible decisions with a prompt key (the ones a state change can concern), sorted.
        self._prompted_times: list[datetime] = []
        self._prompts: defaultdict[tuple[str, str], list[Event]] = defaultdict(list)
        #: Decisions by the canonical path each path they name resolves to (plan.by_path), by their ids (only winners
        #: are indexed).
        self._by_path: defaultdict[str, ByRecordId[Event]] = defaultdict(ByRecordId)
        #: The decisions a rule's ``signals`` selects, by their ids.
        self._signal_claims: ByRecordId[Event] = ByRecordId()
        # --- invalidation.py and sums.py
        self._dirty: ById[Event] = ById()
        #: Every decision is to be re-run (a rebuild): no entry per decision in _dirty, a million of them at a start.
        self._all_dirty = False
        #: When cached outcomes stop being valid by time alone, with their decisions.
        self._expiry: list[tuple[datetime, int, Event]] = []
        self._results: dict[tuple[str, str], tuple[tuple[Any, ...], AgentResult]] = {}
        #: Arrivals mark nothing while true: a rebuild marks every decision at once (_all_dirty).
        self._bulk = False
        #: Decisions the last evaluation re-ran the rules for, and (agent, window) sums it recomputed (figures for
        #: the benchmark and the logs: they show the work follows the change, not the history).
        self.evaluated = 0
        self.summed = 0

    if TYPE_CHECKING:
        # What each part offers the others.

        # visibility.py
        def _let_go(self, record_id: str) -> bool: ...
        def _show(self, e: Record) -> None: ...
        def _show_sorted(self, records: Iterable[Record]) -> None: ...
        def _is_decision(self, e: Record) -> bool: ...
        def _file_document(self, e: Event) -> None: ...
        def add_labels(self, labels: Iterable[Label]) -> None: ...
        def add_checks(self, checks: Iterable[CheckResult]) -> None: ...
        def records(self) -> list[Record]: ...

        # indexes.py
        def _index(self, e: Record) -> None: ...
        def _index_last(self, e: Record) -> None: ...
        def _unindex(self, e: Record) -> None: ...
        def _index_paths(self, e: Event, *, add: bool) -> None: ...
        def _index_every_path(self) -> None: ...
        def _forget_agent(self, agent: str) -> None: ...
        def _changed(self, a: Agent, i: int) -> None: ...
        def _prompt_key(self, prompt: str | None) -> str | None: ...
        def _path_key(self, path: str) -> str: ...
        def _next_same_prompt(self, d: Event) -> Event | None: ...
        def _put_file(self, path: str, f: FileState | None) -> None: ...

        # invalidation.py
        def _touch(self, e: Event) -> None: ...
        def _touch_neighbours(self, e: Event, a: Agent) -> None: ...
        def _touch_state_change(self, t: datetime) -> None: ...
        def _touch_path(self, path: str, created: set[datetime]) -> None: ...
        def _touch_citing(self, keys: set[tuple[str, str]]) -> None: ...
        def _touch_relinked(self, named: Iterable[Event]) -> None: ...

        # eviction.py
        def _let_go_of_checks_and_file_times(self, horizon: datetime) -> None: ...
