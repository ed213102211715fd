"""The daemon's incremental scoring model: the same six rules, evaluated once per decision and kept.

:func:`scorers.score.evaluate` rebuilds a :class:`~scorers.context.Context` from every record and runs
every rule on every decision: right for the CLI and the conformance cases, far too slow for a daemon
holding a million events and re-scoring after each one. :class:`LiveModel` keeps the indexes the
rules read, updates them as records arrive, and re-runs a rule only for the decisions whose outcome
can have changed. It implements :class:`~scorers.context.RuleContext`, so the rules are the very
same functions; ``tests/test_live.py`` checks that it agrees with the pure evaluation, field by
field, over random record sets, arrival orders and evaluation times.

What can change a cached outcome, and what the model does about it:

* **Records becoming visible or going** (ingested, removed, or their time ``≤ T`` reached): a
  decision of agent A at ``t`` re-evaluates A's refusals awaiting a follow-up in
  ``[t − follow_up, t)`` that it would follow up, A's labelled decisions before ``t`` in its
  thread whose reply window it falls in, and the next decision with the same prompt; a
  state-change event at ``t`` re-evaluates decisions with a prompt at or after ``t``; a label its
  decision; a check the decisions citing its target; a file-index change the decisions naming the
  path (under any name: decisions are filed by the canonical path theirs resolve to), their
  successors, and the signal-claiming gaps it could answer; a change of the symlinks all of those.
* **Time passing**: each outcome carries the instant it stops being valid (a pending deadline, a
  check ageing out); the model re-evaluates it then. Records only enter the indexes once ``ts ≤ T``,
  so every other outcome is final. A clock that steps back rebuilds the model.
* **Windows sliding**: per-decision counts are summed per (agent, window) from cached per-block
  column sums, and the sum is kept until the agent changes or a decision (or the previous answer
  of a repeat) leaves the window.

Memory: only what the rules read is kept. Text is reduced to the configured phrases it matches
(:func:`reduce_text`, which provably keeps every phrase match), repeated strings are shared, and the
audit rows are built on request (:meth:`LiveModel.agent_result`) instead of being held for every
agent and window. With ``evict`` (the daemon's model), records a day behind the longest window are let
go (:meth:`LiveModel._evict`): memory follows the window, not the history. Their ids stay as 8-byte
hashes; a record arriving with one of them has the store's records of that id recalled (spec 1.1).
A clock that steps back past what was let go raises :class:`HistoryEvicted`: build anew from the store.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import operator
import re
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Any, NamedTuple

from collectors import phrases
from collectors.citations import path_never_exists
from collectors.links import NO_LINKS, LinkMap, Links
from collectors.records import CheckResult, Event, FileEntry, Label, Order
from collectors.rfc3339 import from_us, from_us_many, to_us
from scorers import consistency_under_repeat, gap_surfacing_rate, refusal_correctness, self_correction_rate
from scorers.context import paths_of, prompt_key, sort_key, supersedes_check, supersedes_label
from scorers.score import (
    RULES,
    AgentResult,
    ComponentResult,
    DecisionRow,
    WindowResult,
    score_agent,
    summarise,
    window_width,
)
from scorers.spec import COMPONENTS, ScoringConfig, outcome_part

_NEVER = datetime.max.replace(tzinfo=UTC)
_DAWN = datetime.min.replace(tzinfo=UTC)
_NO_WIDTH = timedelta(0)  # the width-independent rules ignore it
#: Position of each component's (passed, counted, pending) in a decision's counts; false gaps last.
_SLOT = {name: 3 * i for i, name in enumerate(COMPONENTS)}
_CONS = _SLOT[consistency_under_repeat.NAME]
_FALSE_GAP = 3 * len(COMPONENTS)
_WIDTH = _FALSE_GAP + 1
_ZERO = (0,) * _WIDTH
_SEPARATOR = "\n"
#: Decisions per block of the cached prefix sums (see _range_sums): a window's sum adds at most 2 × (_BLOCK − 1)
#: decisions' counts to one difference of prefixes.
_BLOCK = 32

#: How far behind the longest window the model keeps records (see :meth:`LiveModel._evict`): the clock may step back
#: this far without a reload from the store.
EVICT_SLACK = timedelta(days=1)
#: Records are let go in steps of this much time: each step takes that day's records out of the indexes (the
#: benchmark's 32k a day in ~0.3 s), so once a day; memory holds at most this much more than the windows and the slack.
EVICT_EVERY = timedelta(days=1)

#: What the store holds under some ids: every event with one of them, every label on one of them.
Lookup = Callable[[Collection[str]], tuple[list[Event], list[Label]]]


class HistoryEvicted(Exception):
    """Raised by :meth:`LiveModel.evaluate` for a time whose windows reach records the model has let go (the clock
    stepped back further than :data:`EVICT_SLACK`): build the model again from the store."""


def _id_hash(record_id: str) -> int:
    """A stable 64-bit hash of a record id (Python's own ``hash`` of a string changes from process to process)."""
    return int.from_bytes(hashlib.blake2b(record_id.encode(), digest_size=8).digest(), "big", signed=True)


class _IdHashes:
    """The ids of the records the model let go, as 64-bit hashes: 8 bytes an id, in sorted machine-integer arrays
    bucketed by the top 12 bits (an insert moves a few kilobytes, a lookup bisects one small array). A hash found
    here may belong to another id; the caller asks the store, which holds every record, what it really is.
    """

    __slots__ = ("buckets", "count")

    def __init__(self) -> None:
        self.buckets: dict[int, array[int]] = {}
        self.count = 0

    def add(self, record_id: str) -> None:
        """Note the hash of one id (once)."""
        h = _id_hash(record_id)
        bucket = self.buckets.get(h >> 52)
        if bucket is None:
            bucket = self.buckets[h >> 52] = array("q")
        i = bisect.bisect_left(bucket, h)
        if i == len(bucket) or bucket[i] != h:
            bucket.insert(i, h)
            self.count += 1

    def might_hold(self, record_id: str) -> bool:
        """True if the hash of ``record_id`` was noted (by it, or by another id with the same hash)."""
        h = _id_hash(record_id)
        bucket = self.buckets.get(h >> 52)
        if bucket is None:
            return False
        i = bisect.bisect_left(bucket, h)
        return i < len(bucket) and bucket[i] == h


class _Stub(NamedTuple):
    """A stored heartbeat record that is not a decision, as the model keeps it.

    No rule reads such a record but through its time when it is a state change (its kind says so); the model needs
    only its id (a later record with that id is dropped, spec 1.1), its read order (which of two records with one id
    comes first), its time (a rebuild for an earlier T hides it again) and its kind. A whole Event has 15 fields;
    many logs are mostly such records (progress notes, tool output, commits, finished runs).
    """

    id: str
    ts: datetime
    kind: str
    path: str
    line: int
    generation: int

    @property
    def order(self) -> Order:
        """The record's position in read order (spec section 1), as :attr:`Event.order`."""
        return (self.path, self.generation, self.line)


#: What the model stores for a record: the whole event, or the stub of one no rule reads.
_Record = Event | _Stub
#: The classes of the records :meth:`LiveModel.records` lists (the model cache refers to them by position).
RECORD_TYPES: tuple[type, ...] = (Event, _Stub)


def pack_records(records: Iterable[_Record]) -> tuple[list[_Record], Iterator[Any]]:
    """``records`` in the order the columns give them (events, then stubs), and the columns, made one at a time:
    per field of :class:`Event`, then of :class:`_Stub`, a list of the values (times as microseconds in machine
    integers). For the model cache (daemon/modelcache.py): pickled record by record, each would leave its
    constructor's arguments and its time's in the pickler's memo until the end, twice the model's size while
    writing, and a fragmented heap after reading.
    """
    events = [r for r in records if isinstance(r, Event)]
    stubs = [r for r in records if isinstance(r, _Stub)]

    def columns() -> Iterator[Any]:
        for group, names in ((events, Event._fields), (stubs, _Stub._fields)):
            for f in names:
                yield array("q", [to_us(r.ts) for r in group]) if f == "ts" else [getattr(r, f) for r in group]

    return [*events, *stubs], columns()


def unpack_records(columns: Iterator[Any]) -> list[_Record]:
    """The records of :func:`pack_records`, from its columns, in its order; line numbers shared again (one int
    object per number, as the model keeps them). Built by C-level maps: a million records in well under a second.
    """
    lines: dict[int | None, int | None] = {}
    out: list[_Record] = []
    for cls in (Event, _Stub):
        c = {f: next(columns) for f in cls._fields}
        c["ts"] = from_us_many(c["ts"])
        c["line"] = list(map(lines.setdefault, c["line"], c["line"]))
        out += map(tuple.__new__, itertools.repeat(cls),  # type: ignore[arg-type]  # tuple.__new__(cls, row)
                   zip(*(c[f] for f in cls._fields), strict=True))
    return out


#: A record's time, and its read order: the keys of every sort and bisect here (C-level getters).
_ts = attrgetter("ts")
_order_of = attrgetter("order")


def _first(item: tuple[datetime, str]) -> datetime:
    return item[0]


def sorted_by_key(records: Iterable[_Record]) -> list[_Record]:
    """``records`` sorted by :func:`~scorers.context.sort_key` (time, then read order), without its key per record.

    ``sorted(key=sort_key)`` holds a (time, (path, generation, line)) pair for every record until it returns: ~160
    bytes each, 150 MB for a rebuild of a million records, and the pools it emptied stay with the process
    (measured: 78 MB of a rebuild's peak on the benchmark's 962k records). Sorting by the records' own time objects
    allocates no key; only the runs of equal times are then sorted by read order (the sort is stable either way).
    """
    out = sorted(records, key=_ts)
    times = list(map(_ts, out))
    same = list(map(operator.eq, times, itertools.islice(times, 1, None)))  # same[k]: out[k] and out[k + 1] tie
    del times
    end = -1
    for k in itertools.compress(itertools.count(), same):
        if k < end:
            continue  # inside the run already sorted
        end = k + 1
        while end < len(same) and same[end]:
            end += 1
        out[k:end + 1] = sorted(out[k:end + 1], key=_order_of)
    return out


_WORD = re.compile(r"\w")


class Vocabulary:
    """The phrases the rules ask about, with one combined pattern that finds every match in one pass."""

    def __init__(self, phrases_: Iterable[str]) -> None:
        self.phrases = tuple(sorted({p.lower() for p in phrases_ if p}, key=lambda p: (-len(p), p)))
        # At each position, the longest phrase that matches there (the lookahead makes every position count, so
        # phrases starting inside another match are found too); a shorter phrase matching at the same position is
        # a prefix of the longest one, checked by hand from ``prefixes``.
        alternation = "|".join(re.escape(p) for p in self.phrases)
        self.pattern = re.compile(rf"(?<!\w)(?=({alternation})(?!\w))") if self.phrases else None
        self.prefixes = {p: [q for q in self.phrases if q != p and p.startswith(q)] for p in self.phrases}

    def found(self, text: str) -> list[str]:
        """The phrases that match ``text`` (the spec's rule: lower-cased, no word character on either side)."""
        if self.pattern is None or not text:
            return []
        lowered = text.lower()
        found: set[str] = set()
        for m in self.pattern.finditer(lowered):
            p = m.group(1)
            found.add(p)
            start = m.start()
            for q in self.prefixes[p]:
                end = start + len(q)
                if end == len(lowered) or _WORD.match(lowered, end) is None:
                    found.add(q)
        return sorted(found)


def reduce_text(text: str, vocabulary: Vocabulary) -> str:
    """The lower-cased phrases of ``vocabulary`` that ``text`` matches, one per line.

    For every phrase ``q`` without a line break, ``matches(reduce_text(t), q) == matches(t, q)``: a phrase
    found in the reduction lies inside one matched phrase ``p`` (it cannot span a line break), and ``p`` sits
    in ``t`` between non-word characters, so ``q`` matches ``t`` at the same place. The caller passes only
    phrases without line breaks. Rules read text only through phrase matches, so they cannot tell the two apart.
    """
    return _SEPARATOR.join(vocabulary.found(text))


class _Checks(Mapping[tuple[str, str], CheckResult]):
    """``ctx.checks`` of the model: the latest visible conclusive check per key, if not older than max_age."""

    def __init__(self, model: LiveModel) -> None:
        self._model = model

    def __getitem__(self, key: tuple[str, str]) -> CheckResult:
        found = self._model.latest_checks.get(key)
        if found is None or found.checked_at <= self._model.at - self._model.config.scoring.check_max_age:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return (k for k in self._model.latest_checks if k in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _File:
    """A file-index entry as the model keeps it: modifications as sorted microseconds, extended in place.

    A busy log gains a modification per ingest pass. As a :class:`FileEntry` each pass rebuilt its tuple (work and
    a new tuple growing with every pass, 56 bytes per time); here a pass appends 8 bytes, and ``changed_in``
    bisects instead of scanning every time.
    """

    __slots__ = ("created", "deleted", "modified")

    def __init__(self, created: datetime, deleted: datetime | None, modified: array[int]) -> None:
        self.created = created
        self.deleted = deleted
        self.modified = modified

    @classmethod
    def of(cls, entry: FileEntry) -> _File:
        """The model's form of a stored entry."""
        return cls(entry.created, entry.deleted, array("q", sorted(to_us(t) for t in entry.modified)))

    def add(self, times: Iterable[datetime]) -> list[datetime]:
        """Record more modification times; returns them sorted."""
        added = sorted(times)
        us = [to_us(t) for t in added]
        if us and self.modified and us[0] <= self.modified[-1]:
            self.modified = array("q", sorted({*self.modified, *us}))  # a batch pass may date a change earlier
        else:
            self.modified.extend(us)
        return added


class _Agent:
    """One agent's visible decisions in (ts, read order), with their cached counts."""

    __slots__ = ("awaiting", "counts", "events", "labelled", "prefix", "pts", "pts_sorted", "repeat_counts", "repeats",
                 "tail", "tail_key", "version")

    def __init__(self) -> None:
        self.events: list[Event] = []
        #: Per decision: (passed, counted, pending) per component, then 1 for a false gap.
        self.counts: list[tuple[int, ...]] = []
        #: Per decision: the time of the previous answer its consistency outcome compares with (None: —).
        self.pts: list[datetime | None] = []
        self.pts_sorted: list[datetime] = []
        #: The decisions whose pts is set (repeats with a counted consistency outcome), in (ts, read order).
        self.repeats: list[Event] = []
        #: id() of each of those → (pts, its consistency passed, counted, pending): what a window whose edge
        #: passed pts takes back out, without finding the decision's position.
        self.repeat_counts: dict[int, tuple[datetime, int, int, int]] = {}
        #: Column sums of ``counts[:k * _BLOCK]`` at ``prefix[k * _WIDTH:(k + 1) * _WIDTH]``, for the leading k
        #: kept here (k = 0 always). Flat machine integers: about 5 bytes per decision.
        self.prefix = array("q", _ZERO)
        #: Ids of this agent's labelled decisions → their latest visible label time (a reply can matter until
        #: ``correction_within`` after it).
        self.labelled: dict[str, datetime] = {}
        #: Refusals only a later decision can decide (refusal_correctness.needs_follow_up), in (ts, read order).
        self.awaiting: list[Event] = []
        self.version = 0
        #: Column sums of the decisions after the last whole block, for (version, number of decisions).
        self.tail: tuple[int, ...] = _ZERO
        self.tail_key: tuple[int, int] = (-1, -1)

    def __getstate__(self) -> dict[str, Any]:
        """For the model cache (daemon/modelcache.py): ``repeat_counts`` is keyed by id(), which an unpickled
        decision does not keep, so it travels as a list aligned with ``repeats`` (the decisions it is keyed by).
        """
        state = {name: getattr(self, name) for name in self.__slots__}
        state["repeat_counts"] = [self.repeat_counts[id(d)] for d in self.repeats]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["repeat_counts"] = {id(d): c for d, c in zip(state["repeats"], state["repeat_counts"], strict=True)}
        for name, value in state.items():
            setattr(self, name, value)

    def changed(self, i: int) -> None:
        """The decision at index ``i`` (and so every later position) changed: drop the prefixes that include it."""
        del self.prefix[(i // _BLOCK + 1) * _WIDTH:]

    def index(self, e: Event) -> int | None:
        """Where ``e`` is in :attr:`events`, or None when it is not there."""
        i = bisect.bisect_left(self.events, sort_key(e), key=sort_key)
        return i if i < len(self.events) and self.events[i] is e else None

    def between(self, after: datetime, until: datetime) -> tuple[int, int]:
        """The slice of decisions with ``after < ts ≤ until``."""
        return bisect.bisect_right(self.events, after, key=_ts), bisect.bisect_right(self.events, until, key=_ts)


class LiveModel:
    """Records in, per-window results out, re-evaluating only what changed. Not thread-safe: one owner."""

    def __init__(self, config: ScoringConfig, *, evict: bool = False) -> None:
        self.config = config
        self.at = _DAWN
        #: Let go of the records behind every window (:meth:`_evict`); then records must come with a lookup.
        self.evicts = evict
        #: Every record with a time up to this may have been let go; their ids are in _evicted.
        self.evicted_to = _DAWN
        self._evicted = _IdHashes()
        self._readmitting = False
        self.latest_checks: dict[tuple[str, str], CheckResult] = {}
        self._decision_kinds = frozenset(config.decision_kinds)
        self._state_kinds = frozenset(config.state_change_kinds)
        ph = config.phrases
        vocabulary = [*ph.reason, *ph.alternatives, *ph.gap, *ph.acknowledgement, *(s.phrase for s in config.signals)]
        #: None keeps texts whole: a phrase with a line break could span two reduced phrases.
        self._vocabulary = None if any(_SEPARATOR in p for p in vocabulary) else Vocabulary(vocabulary)
        self._shared: dict[Any, Any] = {}
        self._seq = itertools.count()
        self._fresh = True
        # Every stored record lives in exactly one of: winners / shadowed (visible), hidden (ts > T).
        self._winner: dict[str, _Record] = {}
        #: With ``evict``, the ids of the records shown, by the day of their time (date ordinal, UTC): where _evict
        #: looks, so that letting go of a day's records costs that day's records, not a walk over every record held.
        self._days: dict[int, list[str]] = {}
        self._shadowed: dict[str, list[_Record]] = {}
        self._hidden: list[tuple[datetime, int, _Record]] = []
        #: How many records in _hidden carry each id: holds_id answers for them without walking the heap.
        self._hidden_ids: Counter[str] = Counter()
        self._loaded: list[_Record] = []  # arrived before the first evaluation, in no order
        self._removed: set[int] = set()  # id() of hidden events removed before they became visible
        self._documents: dict[str, list[Event]] = {}
        self._labels: dict[str, list[Label]] = defaultdict(list)
        #: The ids in _labels that no record held here carries, and how many visible labels are on them: labels on a
        #: decision honestyd never saw (a typo, another system's id), kept as the store keeps them and counted.
        self._orphans: set[str] = set()
        self.unmatched_labels = 0
        self._hidden_labels: list[tuple[datetime, int, Label]] = []
        self._all_checks: list[CheckResult] = []
        self._hidden_checks: list[tuple[datetime, int, CheckResult]] = []
        self._files: dict[str, _File] = {}
        #: The symlinks inside the root: the index is by canonical path, and a cited path names its target's entry.
        self._links: LinkMap = NO_LINKS
        self._created: list[tuple[datetime, str]] = []
        self._file_times: list[tuple[datetime, str]] = []
        # Indexes over visible winners.
        self._agents: dict[str, _Agent] = {}
        self._state_times: list[datetime] = []
        #: Times of the visible decisions with a prompt key (the ones a state change can exempt), sorted.
        self._prompted_times: list[datetime] = []
        self._prompts: dict[tuple[str, str], list[Event]] = defaultdict(list)
        self._by_path: dict[str, dict[int, Event]] = defaultdict(dict)
        self._signal_claims: dict[int, Event] = {}
        # Caches.
        self._dirty: dict[int, Event] = {}
        #: Every decision is to be re-run (a rebuild): no entry per decision in _dirty, a million of them at a start.
        self._all_dirty = False
        self._expiry: list[tuple[datetime, int, Event]] = []
        self._results: dict[tuple[str, str], tuple[tuple[int, int, int, int], AgentResult]] = {}
        self._signal_globs = [s.glob for s in config.signals]
        self._max_within = max((s.within for s in config.signals), default=_NO_WIDTH)
        self._bulk = False
        #: Decisions the last :meth:`evaluate` re-ran the rules for, and (agent, window) sums it recomputed
        #: (figures for the benchmark and the logs: they show the work follows the change, not the history).
        self.evaluated = 0
        self.summed = 0

    # --- the model cache (daemon/modelcache.py)

    def records(self) -> list[_Record]:
        """Every record the model holds (visible, shadowed, hidden, loaded, removed while hidden), each once."""
        return [*self._winner.values(), *(e for rest in self._shadowed.values() for e in rest),
                *(h[2] for h in self._hidden), *self._loaded]

    def holds_id(self, record_id: str) -> bool:
        """True if a record with this id is here (shown, or dated after T), or was let go (its 64-bit hash matches:
        the store has it). Records added before the first evaluation are not asked about (see LiveFeed.knows)."""
        return record_id in self._winner or record_id in self._hidden_ids or self._let_go(record_id)

    def size(self) -> tuple[int, int]:
        """(records held, ids let go): what :meth:`records` would list, counted without listing them."""
        held = len(self._winner) + sum(map(len, self._shadowed.values())) + len(self._hidden) + len(self._loaded)
        return held, self._evicted.count

    def __getstate__(self) -> dict[str, Any]:
        """The model as pickled: the maps keyed by id() hold their records instead (an unpickled record has another
        id; pickle keeps each record one object, so the keys are rebuilt from the same objects the indexes hold), so
        do the maps keyed by the records' ids (rebuilt with the records' own strings as keys), the counter is its next
        value (itertools objects do not pickle on every Python), and the cache of shared values starts empty.
        """
        state = self.__dict__.copy()
        state["_seq"] = next(self._seq)
        state["_winner"] = list(self._winner.values())
        state["_shadowed"] = list(self._shadowed.values())
        state["_shared"] = {}  # only spares memory for records to come: refilled as they arrive
        state["_dirty"] = list(self._dirty.values())
        # Each id filed by day as the record it names, where one is held: pickled as a string it would come back a
        # second copy of the record's own id (a million ids, 53 MB, on the benchmark's store).
        state["_days"] = {d: [self._winner.get(i, i) for i in ids] for d, ids in self._days.items()}
        state["_by_path"] = {p: list(bucket.values()) for p, bucket in self._by_path.items()}
        state["_signal_claims"] = list(self._signal_claims.values())
        waiting = itertools.chain((h[2] for h in self._hidden), self._loaded)
        state["_removed"] = [e for e in waiting if id(e) in self._removed]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["_seq"] = itertools.count(state["_seq"])
        state["_winner"] = dict(zip(map(attrgetter("id"), state["_winner"]), state["_winner"], strict=True))
        state["_shadowed"] = {rest[0].id: rest for rest in state["_shadowed"] if rest}
        state["_dirty"] = {id(e): e for e in state["_dirty"]}
        state["_days"] = {d: [r if type(r) is str else r.id for r in rs] for d, rs in state["_days"].items()}
        state["_by_path"] = defaultdict(dict, {p: {id(e): e for e in b} for p, b in state["_by_path"].items()})
        state["_signal_claims"] = {id(e): e for e in state["_signal_claims"]}
        state["_removed"] = {id(e) for e in state["_removed"]}
        self.__dict__.update(state)

    def reconfigure(self, config: ScoringConfig) -> bool:
        """Take ``config`` when every kept outcome stays right under it (:func:`outcome_part` unchanged: a change of
        weights, windows, the floor, z, alert levels or what the model never reads); the windows are summed afresh at
        the next evaluation. False, and nothing changed, when the rules would decide differently: build a new model.
        """
        if outcome_part(config) != outcome_part(self.config):
            return False
        if self.evicted_to > _DAWN and self.at - config.scoring.longest_window < self.evicted_to:
            return False  # a longer window reaches records already let go
        self.config = config
        self._results.clear()  # sums summarised with the old weights, or for windows that may be gone
        return True

    def let_go(self, horizon: datetime, ids: Iterable[str]) -> None:
        """Before anything is added: the records dated up to ``horizon`` under ``ids`` are not coming (the caller
        left them in the store, every record of those ids), as if :meth:`_evict` had let them go. A start on a store
        with a long history then never holds it all at once."""
        if not self._fresh or self.records():
            raise ValueError("let_go() is for a model nothing was added to yet")
        for rid in ids:
            self._evicted.add(rid)
        self.evicted_to = horizon

    # --- records in

    def add_events(self, events: Iterable[Event], lookup: Lookup | None = None) -> None:
        """Heartbeat events and Markdown decisions, in any order; an already stored (path, line) is ignored.

        ``lookup`` reads the store (committed, these records included): needed once the model has let records go,
        for a record whose id was among theirs (spec 1.1 makes the first in read order the winner, however old).
        """
        watch = bool(self._evicted.count) and not self._readmitting
        arrived: list[_Record] = []
        recalled: set[str] = set()
        for event in events:
            e = self._slim(event)
            if watch:
                arrived.append(e)
                if self._let_go(e.id):
                    recalled.add(e.id)
            if isinstance(e, Event) and e.line is None:
                self._documents.setdefault(e.path, []).append(e)
            self._arrive(e)
        if recalled:
            self._recall(recalled, {e.order for e in arrived if e.id in recalled}, lookup)

    def _recall(self, ids: set[str], arrived: set[Order], lookup: Lookup | None) -> None:
        """Take back every record the model let go under ``ids``, and their labels: the store holds them (and the
        records of those ids that just ``arrived``, which it returns as well and are not taken twice)."""
        if lookup is None:
            raise ValueError("records whose ids the model let go arrived without a lookup into the store")
        events, labels = lookup(ids)
        self._readmitting = True
        try:
            self.add_events(e for e in events if e.ts <= self.evicted_to and e.order not in arrived)
        finally:
            self._readmitting = False
        self.add_labels(labels)

    def replace_document(self, path: str, events: Iterable[Event], lookup: Lookup | None = None) -> None:
        """A brief or finding changed or vanished: its decisions are now ``events`` (none when deleted)."""
        for old in self._documents.pop(path, []):
            self._depart(old)
        self.add_events(events, lookup)

    def add_labels(self, labels: Iterable[Label]) -> None:
        """Reviewer labels, in any order. A label on a decision the model let go is left to the store (it comes
        back with its decision, should that be recalled)."""
        for label in map(self._slim_label, labels):
            if self._let_go(label.decision):
                continue
            if self._fresh or label.ts > self.at:
                heapq.heappush(self._hidden_labels, (label.ts, next(self._seq), label))
            else:
                self._show_label(label)

    def add_checks(self, checks: Iterable[CheckResult]) -> None:
        """Verification results (inconclusive ones are kept but never used, as in the pure evaluation)."""
        shown: set[tuple[str, str]] = set()
        for c in checks:
            self._all_checks.append(c)
            if self._fresh or c.checked_at > self.at:
                heapq.heappush(self._hidden_checks, (c.checked_at, next(self._seq), c))
            elif self._show_check(c):
                shown.add((c.type, c.target))
        self._touch_citing(shown)

    def put_file(self, path: str, entry: FileEntry | None) -> None:
        """The file-index entry of ``path`` as the store now holds it (None: no entry)."""
        self._put_file(path, None if entry is None else _File.of(entry))

    def add_file_times(self, path: str, modified: Iterable[datetime], deleted: datetime | None) -> None:
        """The entry of ``path``, same ``created``, gained modifications and has this deletion time now.

        What a live log does every ingest pass: cheaper than :meth:`put_file` with the whole entry.
        """
        f = self._files[path]
        later = [t for t in f.add(modified) if t > self.at]
        if deleted is not None and deleted != f.deleted and deleted > self.at:
            later.append(deleted)
        f.deleted = deleted
        if not self._fresh:
            for t in later:
                heapq.heappush(self._file_times, (t, path))
            if not self._bulk:
                self._touch_path(path, {f.created})

    def _put_file(self, path: str, f: _File | None) -> None:
        old = self._files.pop(path, None)
        if old is not None:
            self._created.pop(bisect.bisect_left(self._created, (old.created, path)))
        if f is not None:
            self._files[path] = f
            bisect.insort(self._created, (f.created, path))
            if not self._fresh:
                later = [t for t in (f.created, f.deleted) if t is not None and t > self.at]
                at_us = to_us(self.at)
                for us in reversed(f.modified):  # ascending: only the tail can lie after T
                    if us <= at_us:
                        break
                    later.append(from_us(us))
                for t in later:
                    heapq.heappush(self._file_times, (t, path))
        if not self._fresh and not self._bulk:
            self._touch_path(path, {e.created for e in (old, f) if e is not None})

    def put_links(self, links: Links) -> None:
        """The symlinks inside the root as the store now holds them. A change re-files every decision naming a path
        under the file it now names and re-evaluates it, its successor and every signal claim (rare: a link made,
        re-pointed or removed)."""
        new = LinkMap(links)
        if new == self._links:
            return
        named = {id(e): e for bucket in self._by_path.values() for e in bucket.values()}
        self._links = new
        self._by_path = defaultdict(dict)
        for e in named.values():
            for p in paths_of(e):
                self._by_path[self._path_key(p)][id(e)] = e
        if self._fresh or self._bulk:
            return
        for e in named.values():
            self._touch(e)
            nxt = self._next_same_prompt(e)
            if nxt is not None:
                self._touch(nxt)
        for d in self._signal_claims.values():
            self._touch(d)

    def _path_key(self, path: str) -> str:
        """Where a decision naming ``path`` is filed: the canonical path it names (itself if it leaves the root)."""
        return self._links.resolve(path) or path

    def file_state(self, path: str) -> tuple[datetime, datetime | None] | None:
        """(created, deleted) of the model's entry for ``path`` (None: no entry)."""
        f = self._files.get(path)
        return None if f is None else (f.created, f.deleted)

    # --- evaluation

    def evaluate(self, at: datetime) -> dict[str, WindowResult]:
        """Every configured window at ``at``: the same results as :func:`scorers.score.evaluate`, without rows."""
        horizon = self._horizon(at)
        if self._fresh or at < self.at:
            self._rebuild(at, horizon)
        else:
            self._advance(at)
            if horizon is not None:
                self._evict(horizon)
        self.summed = 0
        all_dirty, self._all_dirty = self._all_dirty, False
        dirty, self._dirty = self._dirty, {}
        if all_dirty:  # a rebuild: every decision runs once (those marked since among them)
            self.evaluated = 0
            for each in self._agents.values():
                for k, d in enumerate(each.events):
                    self._reevaluate(d, each, k)
                self.evaluated += len(each.events)
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
            i = 0 if a is None else bisect.bisect_right(a.events, self.at, key=_ts)
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
        rows = [DecisionRow(d, {n: rule(d, self, width) for n, rule in RULES.items()}) for d in a.events[lo:hi]]
        return score_agent(agent, rows, self.config)

    # --- RuleContext

    @property
    def checks(self) -> Mapping[tuple[str, str], CheckResult]:
        """The latest conclusive check per target not older than max_age (a view; built per use so the model
        holds no reference to itself: the daemon freezes it out of the garbage collector, see daemon/app.py).
        """
        return _Checks(self)

    def agent_decisions_between(self, agent: str, after: datetime, until: datetime) -> Sequence[Event]:
        """The agent's decisions with ``after < ts ≤ until`` (and ≤ T), in (ts, read order)."""
        a = self._agents.get(agent)
        if a is None:
            return ()
        lo, hi = a.between(after, min(until, self.at))
        return a.events[lo:hi]

    def state_change_between(self, after: datetime, until: datetime) -> bool:
        """True iff a visible state-change event has ``after < ts ≤ until``."""
        i = bisect.bisect_right(self._state_times, after)
        return i < len(self._state_times) and self._state_times[i] <= until

    def _entry(self, path: str) -> _File | None:
        """The entry of the file ``path`` names (through the symlinks), as known at T."""
        canonical = self._links.resolve(path)
        entry = None if canonical is None else self._files.get(canonical)
        return entry if entry is not None and entry.created <= self.at else None

    def exists(self, path: str, t: datetime) -> bool:
        """``exists(p, t)`` over the index as known at T; ``..`` and ``/`` never exist, nor a path through a symlink
        that leaves the root."""
        if path_never_exists(path):
            return False
        entry = self._entry(path)
        if entry is None or entry.created > t:
            return False
        # A deletion after T is not known yet (spec, Time).
        return entry.deleted is None or entry.deleted > self.at or entry.deleted > t

    def changed_in(self, path: str, a: datetime, b: datetime) -> bool:
        """True iff ``path`` was created, modified or deleted in ``(a, b]``, as known at T."""
        entry = self._entry(path)
        if entry is None:
            return False
        b = min(b, self.at)
        if a < entry.created <= b or (entry.deleted is not None and a < entry.deleted <= b):
            return True
        modified = entry.modified
        i = bisect.bisect_right(modified, to_us(a))  # the first modification after a
        return i < len(modified) and modified[i] <= to_us(b)

    def created_matching(self, glob: str, a: datetime, b: datetime, exclude: str | None) -> list[str]:
        """Indexed files that ``glob`` matches under some name, created in ``(a, b]`` (and ≤ T), other than the file
        ``exclude`` names; their canonical paths, sorted."""
        links = self._links
        own = None if exclude is None else links.resolve(exclude)
        lo = bisect.bisect_right(self._created, a, key=_first)
        hi = bisect.bisect_right(self._created, min(b, self.at), key=_first)
        return sorted(p for _, p in self._created[lo:hi] if p != own and links.matches(glob, p))

    def previous_same_prompt(self, d: Event) -> Event | None:
        """The latest earlier decision of the same agent with the same prompt key."""
        group = self._prompt_group(d)
        i = bisect.bisect_left(group, sort_key(d), key=sort_key)
        return group[i - 1] if i > 0 else None

    def _next_same_prompt(self, d: Event) -> Event | None:
        """The next decision of d's agent with d's prompt key, after d (whether or not d is still indexed)."""
        group = self._prompt_group(d)
        j = bisect.bisect_right(group, sort_key(d), key=sort_key)
        return group[j] if j < len(group) else None

    def _prompt_group(self, d: Event) -> list[Event]:
        """The visible decisions of d's agent with d's prompt key, in (ts, read order); none without a key."""
        key = self._prompt_key(d.prompt)
        return [] if key is None else self._prompts.get((d.agent, key), [])

    def current_down_labels(self, decision_id: str) -> list[Label]:
        """Each reviewer's latest visible label on the decision, where it is ``down``, by reviewer."""
        current: dict[str, Label] = {}
        for label in self._labels.get(decision_id, ()):
            if supersedes_label(label, current.get(label.reviewer)):
                current[label.reviewer] = label
        return [current[r] for r in sorted(current) if current[r].value == "down"]

    # --- arrival and departure of events

    def _slim(self, e: Event) -> _Record:
        """``e`` with its text reduced to the phrases it matches and its repeated values shared; a stub when it is not
        a decision (see :class:`_Stub`: a state change is read only through its time)."""
        share = self._shared.setdefault
        if e.line is not None and e.kind not in self._decision_kinds:
            return _Stub(e.id, e.ts, share(e.kind, e.kind), share(e.path, e.path), share(e.line, e.line),
                         e.generation)
        text = e.text if self._vocabulary is None else reduce_text(e.text, self._vocabulary)
        # Line numbers too: one int object per line number, not per event (most are above the small-int cache).
        return e._replace(
            text=share(text, text), agent=share(e.agent, e.agent), kind=share(e.kind, e.kind),
            line=share(e.line, e.line), path=share(e.path, e.path), thread=share(e.thread, e.thread),
            prompt=share(e.prompt, e.prompt), reason=share(e.reason, e.reason),
            citations=share(e.citations, e.citations), alternatives=share(e.alternatives, e.alternatives),
            subject=share(e.subject, e.subject),
        )

    def _slim_label(self, label: Label) -> Label:
        """``label`` with its reviewer and file shared, and its decision id the decision's own string when the model
        holds the decision (a rebuild adds every label again once the decisions are in)."""
        share = self._shared.setdefault
        known = self._winner.get(label.decision)
        return label._replace(decision=label.decision if known is None else known.id,
                              reviewer=share(label.reviewer, label.reviewer), path=share(label.path, label.path))

    def _prompt_key(self, prompt: str | None) -> str | None:
        if prompt is None:
            return None
        key = ("prompt", prompt)
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = (prompt_key(prompt),)
        result: str | None = found[0]
        return result

    def _arrive(self, e: _Record) -> None:
        if self._fresh:
            self._loaded.append(e)  # the first evaluation sorts them all at once (a heap entry would cost ~100 B)
        elif e.ts > self.at:
            heapq.heappush(self._hidden, (e.ts, next(self._seq), e))
            self._hidden_ids[e.id] += 1
        else:
            self._show(e)

    def _show(self, e: _Record) -> None:
        """A stored event became visible: it wins its id, or waits behind the winner in read order."""
        winner = self._winner.get(e.id)
        if winner is None:
            self._winner[e.id] = e
            if self._orphans and e.id in self._orphans:  # the labels on this id find their record
                self._orphans.discard(e.id)
                self.unmatched_labels -= len(self._labels[e.id])
            if self.evicts:
                self._days.setdefault(e.ts.toordinal(), []).append(e.id)
            self._index(e)
            return
        order = e.order
        if winner.order == order or any(s.order == order for s in self._shadowed.get(e.id, ())):
            return  # already stored: a replay
        if self.evicts:
            self._days.setdefault(e.ts.toordinal(), []).append(e.id)
        if order < winner.order:
            self._unindex(winner)
            self._shadowed.setdefault(e.id, []).append(winner)
            self._winner[e.id] = e
            self._index(e)
        else:
            self._shadowed.setdefault(e.id, []).append(e)

    def _depart(self, e: Event) -> None:
        """A stored event was removed from the store (its Markdown file changed or went)."""
        if self._winner.get(e.id) is e:
            self._unindex(e)
            rest = self._shadowed.pop(e.id, [])
            if rest:
                rest.sort(key=_order_of)
                nxt, others = rest[0], rest[1:]
                if others:
                    self._shadowed[e.id] = others
                self._winner[e.id] = nxt
                self._index(nxt)
                self._file_again(e.id)
            else:
                del self._winner[e.id]
                labels = self._labels.get(e.id)
                if labels:  # its labels now name no record
                    self._orphans.add(e.id)
                    self.unmatched_labels += len(labels)
            return
        shadowed = self._shadowed.get(e.id, [])
        for i, s in enumerate(shadowed):
            if s is e:
                del shadowed[i]
                if not shadowed:
                    del self._shadowed[e.id]
                self._file_again(e.id)
                return
        self._removed.add(id(e))  # still hidden: forget it when its time comes
        if not self._fresh:  # in _hidden, not _loaded
            self._unhide_id(e.id)

    def _unhide_id(self, record_id: str) -> None:
        """One hidden record of this id shown or removed."""
        left = self._hidden_ids[record_id] - 1
        if left:
            self._hidden_ids[record_id] = left
        else:
            del self._hidden_ids[record_id]

    def _file_again(self, record_id: str) -> None:
        """One of the id's records went and others stay: file the id under the day of its newest one left. The days
        of the others may have been let go already while the one that went held the id back; without this the id
        would wait for the day of the record that went."""
        if self.evicts:
            newest = max(r.ts for r in (self._winner[record_id], *self._shadowed.get(record_id, ())))
            self._days.setdefault(newest.toordinal(), []).append(record_id)

    def _is_decision(self, e: _Record) -> bool:
        return e.line is None or e.kind in self._decision_kinds

    def _index(self, e: _Record) -> None:
        """Add a visible winner to the indexes the rules read, and mark what it can change."""
        if e.kind in self._state_kinds:
            bisect.insort(self._state_times, e.ts)
            if not self._bulk:
                self._touch_prompted_after(e.ts)
        if isinstance(e, _Stub) or not self._is_decision(e):
            return  # not a decision: in no other index
        a = self._agents.get(e.agent)
        if a is None:
            a = self._agents[e.agent] = _Agent()
        at_end = not a.events or sort_key(a.events[-1]) <= sort_key(e)  # the bulk load's case: no search
        i = len(a.events) if at_end else bisect.bisect_left(a.events, sort_key(e), key=sort_key)
        a.events.insert(i, e)
        a.counts.insert(i, _ZERO)
        a.pts.insert(i, None)
        a.changed(i)
        a.version = next(self._seq)  # model-wide: an agent removed and re-created never repeats a version
        if e.id in self._labels:
            a.labelled[e.id] = max(lb.ts for lb in self._labels[e.id])
        if refusal_correctness.needs_follow_up(e, self):
            bisect.insort(a.awaiting, e, key=sort_key)
        key = self._prompt_key(e.prompt)
        if key is not None:
            bisect.insort(self._prompted_times, e.ts)
            group = self._prompts[(e.agent, key)]
            if not group or sort_key(group[-1]) <= sort_key(e):
                group.append(e)
            else:
                group.insert(bisect.bisect_left(group, sort_key(e), key=sort_key), e)
        self._index_paths(e, add=True)
        if not self._bulk:  # a rebuild marks them all at once (_all_dirty)
            self._dirty[id(e)] = e
            self._touch_neighbours(e, a)

    def _unindex(self, e: _Record) -> None:
        """Take a winner out of the indexes, and mark what its going can change."""
        if e.kind in self._state_kinds:
            del self._state_times[bisect.bisect_left(self._state_times, e.ts)]
            self._touch_prompted_after(e.ts)
        if isinstance(e, _Stub) or not self._is_decision(e):
            return
        a = self._agents[e.agent]
        i = a.index(e)
        assert i is not None
        pts = a.pts[i]
        if pts is not None:
            del a.pts_sorted[bisect.bisect_left(a.pts_sorted, pts)]
            del a.repeats[bisect.bisect_left(a.repeats, sort_key(e), key=sort_key)]
            del a.repeat_counts[id(e)]
        del a.events[i], a.counts[i], a.pts[i]
        a.changed(i)
        a.version = next(self._seq)  # model-wide: an agent removed and re-created never repeats a version
        a.labelled.pop(e.id, None)
        if refusal_correctness.needs_follow_up(e, self):
            del a.awaiting[bisect.bisect_left(a.awaiting, sort_key(e), key=sort_key)]
        key = self._prompt_key(e.prompt)
        if key is not None:
            del self._prompted_times[bisect.bisect_left(self._prompted_times, e.ts)]
            group = self._prompts[(e.agent, key)]
            j = bisect.bisect_left(group, sort_key(e), key=sort_key)
            del group[j]  # its successor is marked by _touch_neighbours below
            if not group:
                del self._prompts[(e.agent, key)]
        self._index_paths(e, add=False)
        self._dirty.pop(id(e), None)
        self._touch_neighbours(e, a)
        if not a.events:
            self._forget_agent(e.agent)

    def _unindex_all(self, winners: Collection[_Record]) -> None:
        """Take winners out of the indexes at once, marking nothing (records let go behind every window, see
        _evict). Each sorted list loses them in one pass over its part up to the latest of them: taken out one by
        one, each deletion near the front moved the rest of its list (~40 µs a record let go, 1.3 s a day on the
        benchmark's store)."""
        gone = {id(e) for e in winners}
        state_times = [e.ts for e in winners if e.kind in self._state_kinds]
        prompted: list[datetime] = []
        groups: set[tuple[str, str]] = set()
        by_agent: dict[str, list[Event]] = defaultdict(list)
        for e in winners:
            if isinstance(e, _Stub) or not self._is_decision(e):
                continue
            by_agent[e.agent].append(e)
            key = self._prompt_key(e.prompt)
            if key is not None:
                prompted.append(e.ts)
                groups.add((e.agent, key))
            self._index_paths(e, add=False)
            self._dirty.pop(id(e), None)
        latest = max((e.ts for e in winners), default=_DAWN)
        _drop_times(self._state_times, state_times)
        _drop_times(self._prompted_times, prompted)
        for group_key in groups:
            group = self._prompts[group_key]
            _drop_records(group, gone, latest)
            if not group:
                del self._prompts[group_key]
        for agent, es in by_agent.items():
            a = self._agents[agent]
            until = max(e.ts for e in es)
            k = bisect.bisect_right(a.events, until, key=_ts)
            keep = [i for i in range(k) if id(a.events[i]) not in gone]
            first = next((i for i, j in enumerate(keep) if i != j), len(keep))  # the first decision taken out
            _drop_times(a.pts_sorted, [p for i in range(first, k) if id(a.events[i]) in gone
                                       and (p := a.pts[i]) is not None])
            a.events[:k] = [a.events[i] for i in keep]
            a.counts[:k] = [a.counts[i] for i in keep]
            a.pts[:k] = [a.pts[i] for i in keep]
            a.changed(first)
            a.version = next(self._seq)  # model-wide: an agent removed and re-created never repeats a version
            for e in es:
                a.labelled.pop(e.id, None)
                a.repeat_counts.pop(id(e), None)
            _drop_records(a.repeats, gone, until)
            _drop_records(a.awaiting, gone, until)
            if not a.events:
                self._forget_agent(agent)

    def _forget_agent(self, agent: str) -> None:
        """An agent with no visible decision left: it goes, and its cached results with it."""
        del self._agents[agent]
        for name, _ in self.config.scoring.windows:
            self._results.pop((agent, name), None)

    def _index_paths(self, e: Event, *, add: bool) -> None:
        paths = paths_of(e)
        for p in paths:
            key = self._path_key(p)
            if add:
                self._by_path[key][id(e)] = e
            else:
                bucket = self._by_path.get(key)
                if bucket is not None:
                    bucket.pop(id(e), None)
                    if not bucket:
                        del self._by_path[key]
        if not paths and phrases.first_match(e.text, self.config.phrases.gap) is not None:
            if add:
                self._signal_claims[id(e)] = e
            else:
                self._signal_claims.pop(id(e), None)

    # --- what an arrival can change

    def _touch(self, e: Event) -> None:
        self._dirty[id(e)] = e

    def _touch_neighbours(self, e: Event, a: _Agent) -> None:
        """Decisions of e's agent whose outcome can depend on e (arriving or departing): refusals it may follow
        up, labelled decisions in its thread it may answer, and the next answer to the same prompt.
        """
        lo = bisect.bisect_left(a.awaiting, e.ts - self.config.scoring.follow_up, key=_ts)
        hi = bisect.bisect_left(a.awaiting, e.ts, key=_ts)
        for d in a.awaiting[lo:hi]:
            if refusal_correctness.follows_up(e, d):
                self._touch(d)
        within = self.config.scoring.correction_within
        for decision_id, last_label in a.labelled.items():
            if e.ts <= last_label + within:
                labelled = self._winner.get(decision_id)
                # labelled holds decisions' ids only (a winner that is a stub was never added, or was removed)
                if isinstance(labelled, Event) and labelled.ts <= e.ts and labelled.thread == e.thread:
                    self._touch(labelled)
        nxt = self._next_same_prompt(e)
        if nxt is not None:
            self._touch(nxt)

    def _touch_prompted_after(self, t: datetime) -> None:
        """A state change at ``t``: every repeat answered at or after ``t`` may now be exempt, or no longer."""
        if not self._prompted_times or self._prompted_times[-1] < t:
            return  # the live case: a state change after every prompted decision changes none (no walk over agents)
        for a in self._agents.values():
            lo = bisect.bisect_left(a.events, t, key=_ts)
            for d in a.events[lo:]:
                if d.prompt is not None:
                    self._touch(d)

    def _touch_path(self, path: str, created: set[datetime]) -> None:
        """A file-index change: decisions naming the path, the repeats after them, and signal gap claims (of the
        file's ``created`` times, before and after the change).
        """
        for d in list(self._by_path.get(path, {}).values()):
            self._touch(d)
            nxt = self._next_same_prompt(d)
            if nxt is not None:
                self._touch(nxt)
        if not any(self._links.matches(glob, path) for glob in self._signal_globs):
            return
        for d in self._signal_claims.values():
            if any(c <= d.ts < c + self._max_within for c in created):
                self._touch(d)

    def _touch_citing(self, keys: set[tuple[str, str]]) -> None:
        """New checks of these targets: every decision citing one re-evaluates source_verifiability."""
        if not keys or self._bulk:
            return
        for a in self._agents.values():
            for d in a.events:
                if d.citations and any((c.type, c.target) in keys for c in d.citations):
                    self._touch(d)

    def _let_go(self, record_id: str) -> bool:
        """True when the records of this id are ones the model let go (or a hash says they might be: the store keeps
        every record and label, and a recall brings them back)."""
        return bool(self._evicted.count) and record_id not in self._winner and self._evicted.might_hold(record_id)

    def _show_label(self, label: Label) -> None:
        if self._let_go(label.decision):
            return  # waited hidden while its decision was let go
        self._labels[label.decision].append(label)
        d = self._winner.get(label.decision)
        if d is None:
            self._orphans.add(label.decision)
            self.unmatched_labels += 1
        if isinstance(d, Event) and self._is_decision(d):
            labelled = self._agents[d.agent].labelled
            labelled[d.id] = max(labelled.get(d.id, label.ts), label.ts)
            self._touch(d)

    def _show_check(self, c: CheckResult) -> bool:
        """Make a visible check current if it is the latest conclusive one of its target."""
        if c.ok is None:
            return False
        key = (c.type, c.target)
        if supersedes_check(c, self.latest_checks.get(key)):
            self.latest_checks[key] = c
            return True
        return False

    # --- time

    def _advance(self, at: datetime) -> None:
        """Move T forward: show what is now in the past, and re-evaluate outcomes whose validity ran out."""
        self.at = at
        while self._hidden and self._hidden[0][0] <= at:
            e = heapq.heappop(self._hidden)[2]
            if id(e) in self._removed:
                self._removed.discard(id(e))
            else:
                self._unhide_id(e.id)
                self._show(e)
        while self._hidden_labels and self._hidden_labels[0][0] <= at:
            self._show_label(heapq.heappop(self._hidden_labels)[2])
        shown: set[tuple[str, str]] = set()
        while self._hidden_checks and self._hidden_checks[0][0] <= at:
            c = heapq.heappop(self._hidden_checks)[2]
            if self._show_check(c):
                shown.add((c.type, c.target))
        self._touch_citing(shown)
        while self._file_times and self._file_times[0][0] <= at:
            path = heapq.heappop(self._file_times)[1]
            entry = self._files.get(path)
            self._touch_path(path, set() if entry is None else {entry.created})
        while self._expiry and self._expiry[0][0] <= at:
            self._touch(heapq.heappop(self._expiry)[2])

    def _rebuild(self, at: datetime, horizon: datetime | None) -> None:
        """Index every stored record afresh for ``at`` (first evaluation, or the clock went back), letting go of
        those up to ``horizon`` first (see _evict) when that is due."""
        events = self._stored_events()
        if horizon is not None:
            # An id goes with all its records: it has one dated up to the horizon and none after. Built from the
            # old records only: a map of every id to its newest time was 63 MB for a start on the benchmark's store,
            # where nothing is that old.
            old = {e.id for e in events if e.ts <= horizon}
            if old:
                old -= {e.id for e in events if e.ts > horizon and e.id in old}
                events = [e for e in events if e.id not in old]
            for rid in old:
                self._evicted.add(rid)
            self._let_go_of_checks_and_file_times(horizon)
            self.evicted_to = horizon
        labels = [lb for lbs in self._labels.values() for lb in lbs] + [h[2] for h in self._hidden_labels]
        files = dict(self._files)
        checks = self._all_checks
        evicted, evicted_to, links = self._evicted, self.evicted_to, self._links
        self.__init__(self.config, evict=self.evicts)  # type: ignore[misc]
        self._evicted, self.evicted_to, self._links = evicted, evicted_to, links
        self._fresh = False
        self.at = at
        self._bulk = True
        self._all_dirty = True
        visible = sorted_by_key(e for e in events if e.ts <= at)
        for e in visible:
            if isinstance(e, Event) and e.line is None:
                self._documents.setdefault(e.path, []).append(e)
            self._show(e)
        for e in events:
            if e.ts > at:
                if isinstance(e, Event) and e.line is None:
                    self._documents.setdefault(e.path, []).append(e)
                heapq.heappush(self._hidden, (e.ts, next(self._seq), e))
                self._hidden_ids[e.id] += 1
        # Everything is dirty already: labels, checks and files need no per-record invalidation.
        self.add_labels(labels)
        self.add_checks(checks)
        for path, f in files.items():
            self._put_file(path, f)
        self._bulk = False
        self._advance(at)

    def horizon_at(self, at: datetime) -> datetime:
        """Up to when records may be let go once the model is evaluated at ``at``: a day behind every window."""
        return at - self.config.scoring.longest_window - EVICT_SLACK

    def _horizon(self, at: datetime) -> datetime | None:
        """Up to when records are to be let go at ``at`` (None: not yet due, or the model keeps everything)."""
        if at - self.config.scoring.longest_window < self.evicted_to:
            raise HistoryEvicted(f"the windows at {at} reach records let go up to {self.evicted_to}")
        horizon = self.horizon_at(at)
        return horizon if self.evicts and horizon >= self.evicted_to + EVICT_EVERY else None

    def _evict(self, horizon: datetime) -> None:
        """Let go of the records dated up to ``horizon`` (behind every window by EVICT_SLACK): no window at a time
        ``T ≥ horizon + longest window`` holds them, and no rule reads back from a decision inside one further than
        the window (consistency compares with an earlier answer only inside it; follow-ups, replies and the file
        index look forward or at files). Their ids stay, hashed, for spec 1.1: a later record with one of them
        recalls them from the store (:meth:`_recall`). An id goes only with every record of it (none hidden, none
        newer), so a held id has all its stored records here. Checks and file modifications that old go too.
        """
        hidden = {h[2].id for h in self._hidden}
        day = horizon.toordinal()
        # Every held record up to the horizon was shown on one of these days (the ids of records since gone, or
        # shown again later, are looked at and passed over).
        boundary = self._days.pop(day, [])
        candidates: dict[str, None] = {}
        for d in [d for d in self._days if d < day]:
            candidates.update(dict.fromkeys(self._days.pop(d)))
        candidates.update(dict.fromkeys(boundary))
        gone: list[_Record] = []
        for rid in candidates:
            w = self._winner.get(rid)
            if w is None or w.ts > horizon or rid in hidden:
                continue  # w's own day holds it; a hidden record is filed under its day when shown
            rest = self._shadowed.get(rid, ())
            if all(r.ts <= horizon for r in rest):
                gone.append(w)
                gone.extend(rest)
        gone_ids = {id(r) for r in gone}
        winners = [r for r in gone if self._winner.get(r.id) is r]
        self._unindex_all(winners)
        for w in winners:
            del self._winner[w.id]
            self._shadowed.pop(w.id, None)
            self._labels.pop(w.id, None)
            self._evicted.add(w.id)
        # The horizon's own day goes on holding what it held that stays (its records after the horizon, or blocked).
        later = [rid for rid in dict.fromkeys(boundary) if rid in self._winner]
        if later:
            self._days.setdefault(day, []).extend(later)
        for path in {r.path for r in gone if r.line is None}:
            kept = [d for d in self._documents.get(path, ()) if id(d) not in gone_ids]
            if kept:
                self._documents[path] = kept
            else:
                self._documents.pop(path, None)
        if any(id(x[2]) in gone_ids for x in self._expiry):
            self._expiry = [x for x in self._expiry if id(x[2]) not in gone_ids]
            heapq.heapify(self._expiry)
        self._let_go_of_checks_and_file_times(horizon)
        self.evicted_to = horizon

    def _let_go_of_checks_and_file_times(self, horizon: datetime) -> None:
        """Checks too old to be current at any time whose windows miss ``horizon`` (a newer one of the same target
        would replace them anyway), and file modifications up to it (changed_in is asked from an earlier answer
        inside a window, so never before it)."""
        oldest = horizon - self.config.scoring.check_max_age
        self._all_checks = [c for c in self._all_checks if c.checked_at > oldest]
        self.latest_checks = {k: c for k, c in self.latest_checks.items() if c.checked_at > oldest}
        cut = to_us(horizon)
        for f in self._files.values():
            del f.modified[:bisect.bisect_right(f.modified, cut)]

    def _stored_events(self) -> list[_Record]:
        """The records still stored: :meth:`records` without the ones removed while hidden."""
        return [e for e in self.records() if id(e) not in self._removed]

    # --- outcomes and windows

    def _reevaluate(self, e: Event, a: _Agent, i: int) -> None:
        """Run the rules for ``e`` (at ``a.events[i]``) and keep its counts and when they stop being valid."""
        cfg = self.config.scoring
        counts = [0] * _WIDTH
        until = _NEVER
        for name in COMPONENTS:
            if name == consistency_under_repeat.NAME:
                continue
            o = RULES[name](e, self, _NO_WIDTH)
            s = _SLOT[name]
            counts[s], counts[s + 1], counts[s + 2] = o.passed, o.counted, int(o.pending)
            if o.pending:
                until = min(until, self._deadline(name, e))
            elif name == gap_surfacing_rate.NAME and gap_surfacing_rate.is_false_gap(o):
                counts[_FALSE_GAP] = 1
        for c in e.citations:
            check = self.checks.get((c.type, c.target))
            if check is not None:
                until = min(until, check.checked_at + cfg.check_max_age)
        p = self.previous_same_prompt(e)
        pts = None
        if p is not None:
            o = consistency_under_repeat.compare(e, p, self)
            if o.counted:  # never pending; a — adds nothing to any window
                counts[_CONS], counts[_CONS + 1], counts[_CONS + 2] = o.passed, o.counted, int(o.pending)
                pts = p.ts
        old = a.pts[i]
        if old is not None:
            del a.pts_sorted[bisect.bisect_left(a.pts_sorted, old)]
            del a.repeats[bisect.bisect_left(a.repeats, sort_key(e), key=sort_key)]
            del a.repeat_counts[id(e)]
        if pts is not None:
            bisect.insort(a.pts_sorted, pts)
            bisect.insort(a.repeats, e, key=sort_key)
            a.repeat_counts[id(e)] = (pts, counts[_CONS], counts[_CONS + 1], counts[_CONS + 2])
        a.changed(i)
        shared = tuple(counts)
        a.counts[i] = self._shared.setdefault(("counts", shared), shared)
        a.pts[i] = pts
        a.version = next(self._seq)  # model-wide: an agent removed and re-created never repeats a version
        if until < _NEVER:
            heapq.heappush(self._expiry, (until, next(self._seq), e))

    def _deadline(self, name: str, e: Event) -> datetime:
        """When a pending outcome of ``name`` is decided by time alone."""
        cfg = self.config.scoring
        if name == refusal_correctness.NAME:
            return e.ts + cfg.follow_up
        if name == gap_surfacing_rate.NAME:
            return e.ts + cfg.gap_grace
        if name == self_correction_rate.NAME:
            downs = self.current_down_labels(e.id)
            return min(lb.ts for lb in downs) + cfg.correction_within if downs else self.at
        return self.at  # pragma: no cover - the other rules are never pending

    def _window(self, name: str, width: timedelta) -> WindowResult:
        at = self.at
        listing = max(self.config.scoring.longest_window, width)
        edge = at - width
        agents: dict[str, AgentResult] = {}
        for agent in sorted(self._agents):
            a = self._agents[agent]
            if not a.events or not a.events[-1].ts > at - listing:
                continue
            lo = bisect.bisect_right(a.events, edge, key=_ts)
            stale = bisect.bisect_right(a.pts_sorted, edge)
            key = (a.version, lo, stale, len(a.events))
            cached = self._results.get((agent, name))
            if cached is not None and cached[0] == key:
                agents[agent] = cached[1]
                continue
            result = self._sum(agent, a, lo, edge, stale)
            self.summed += 1
            self._results[(agent, name)] = (key, result)
            agents[agent] = result
        return WindowResult(at, name, width, self.config.weights_active, agents)

    def _sum(self, agent: str, a: _Agent, lo: int, edge: datetime, stale: int) -> AgentResult:
        """The agent's result over its decisions from ``lo``; ``stale`` of its repeats have their previous answer at or
        before ``edge``."""
        totals = _range_sums(a, lo)
        # A repeat whose previous answer left the window counts as — (spec 3.5: both answers in the window).
        if stale:  # else no repeat's previous answer has left the window
            first = bisect.bisect_right(a.repeats, edge, key=_ts)
            # A previous answer is never later than its repeat: of the `stale` repeats whose previous answer is up to
            # the edge, the first `first` are themselves up to it, and the rest are the ones to take out. Counting
            # them ends the walk at the last one instead of at the window's end (a third of the summing time on the
            # benchmark's store).
            left = stale - first
            for d in itertools.islice(a.repeats, first, None):
                if not left:
                    break
                pts, passed, counted, pending = a.repeat_counts[id(d)]
                if pts <= edge:
                    left -= 1
                    totals[_CONS] -= passed
                    totals[_CONS + 1] -= counted
                    totals[_CONS + 2] -= pending
        components = {
            n: ComponentResult(totals[s], totals[s + 1], totals[s + 2]) for n, s in _SLOT.items()
        }
        return summarise(agent, len(a.events) - lo, components, totals[_FALSE_GAP], self.config)


def _drop_times(times: list[datetime], drop: list[datetime]) -> None:
    """Take ``drop`` (a multiset) out of the sorted ``times``, in one pass over the part up to its latest."""
    if not drop:
        return
    left = Counter(drop)
    k = bisect.bisect_right(times, max(drop))
    kept = []
    for t in times[:k]:
        if left[t]:
            left[t] -= 1
        else:
            kept.append(t)
    assert not +left, "a time to drop was not held"
    times[:k] = kept


def _drop_records(records: list[Event], gone: set[int], until: datetime) -> None:
    """Take the records whose id() is in ``gone``, all dated up to ``until``, out of ``records`` sorted by time."""
    k = bisect.bisect_right(records, until, key=_ts)
    if any(id(r) in gone for r in records[:k]):
        records[:k] = [r for r in records[:k] if id(r) not in gone]


def _column_sums(rows: Sequence[tuple[int, ...]]) -> list[int]:
    return [sum(col) for col in zip(*rows, strict=True)] if rows else list(_ZERO)


def _range_sums(a: _Agent, lo: int) -> list[int]:
    """Column sums of ``a.counts[lo:]``: the whole blocks as a difference of cached prefix sums (extended as
    needed), the partial blocks at either end directly.

    A live agent changes at its tail, so all but its last prefix stay cached from one evaluation to the next, and
    a window costs the same however many decisions it holds (block sums added up cost one tuple per block: a
    fifth of the soak daemon's time once its agents held a few thousand decisions each).
    """
    n = len(a.counts)
    first = -(-lo // _BLOCK)  # the first whole block in the range
    last = n // _BLOCK  # whole blocks end before this one
    if first >= last:
        return _column_sums(a.counts[lo:])
    p, w = a.prefix, _WIDTH
    while len(p) <= last * w:
        k = len(p) // w - 1  # prefixes 0..k are cached: add block k
        block = _column_sums(a.counts[k * _BLOCK:(k + 1) * _BLOCK])
        p.extend([x + y for x, y in zip(p[k * w:(k + 1) * w], block, strict=True)])
    # The tail after the last whole block is the same for every window: summed once per version of the agent.
    key = (a.version, n)
    if a.tail_key != key:
        a.tail_key, a.tail = key, tuple(_column_sums(a.counts[last * _BLOCK:]))
    head = _column_sums(a.counts[lo:first * _BLOCK])
    return [end - start + h + t for end, start, h, t in
            zip(p[last * w:(last + 1) * w], p[first * w:(first + 1) * w], head, a.tail, strict=True)]


__all__ = ["LiveModel", "Vocabulary", "outcome_part", "pack_records", "reduce_text", "unpack_records"]
