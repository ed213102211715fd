"""The scoring model kept across restarts: written at shutdown, read once at the next start.

Building the model from the store means reading every row and running the rules on every decision, with no
scores served meanwhile (docs/performance.md has the figures). At a clean shutdown the daemon pickles its
:class:`~daemon.modelkeeper.LiveFeed` (the model and the store marks it reflects) beside the database; the next
start loads it, and the feed's usual sync applies what the store committed since those marks, as it does after
every ingest pass. The result is the model a cold load would build (``tests/daemon/test_modelcache.py`` compares them).

A cache is used only when everything it depends on is unchanged, and otherwise the start loads from the store as
before, with the reason logged:

* the same format and the same code (a hash of the modules whose objects and rules it holds);
* the same store (the random id of migration 008; marks mean nothing in another store);
* marks the store can still catch up from: none ahead of the store, and the change feed kept after its mark (the
  daemon prunes the feed up to what its model applied, so a cache left by a run that went on after writing it is
  refused);
* the same configuration in every part the kept outcomes depend on (everything but what only the I/O reads and what
  only summing reads: weights, windows, the floor; see :func:`scorers.spec.outcome_part`): a hash of it in the
  header refuses a changed one before the file is unpickled, and the two are compared after;
* the file as it was written: a CRC-32 of everything after the header closes it (a byte changed inside a string would
  unpickle without complaint).

The file is used at most once: it is deleted once the store has been asked about it (:func:`accept`), used or
refused, and written anew while running and at the next clean shutdown. A start reads it (:func:`read`) while the
store is still being checked; a start the store stops (a damaged store) leaves it for the next start to judge.

Pickle runs code named in the file it loads, so the cache is trusted only as far as the database is: it is written
0600 by the daemon, and a file not owned by the daemon's user, or writable by anyone else, is refused (and left
where it is).
"""

from __future__ import annotations

import bisect
import copy
import copyreg
import functools
import hashlib
import itertools
import json
import logging
import operator
import os
import pickle
import stat
import sys
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, Protocol

from collectors.rfc3339 import from_us_many, to_us
from daemon import gcpolicy
from daemon.config import Config
from daemon.modelkeeper import LiveFeed, Marks
from daemon.store import Store
from scorers.live import LiveModel, Record, Stub
from scorers.live.records import PACKED_LAYOUT, ById, ByRecordId, Packed
from scorers.spec import outcome_part

log = logging.getLogger("honestyd")

MAGIC = b"honestyd-model-cache\n"
#: Bumped when the file's layout changes (the code hash covers the pickled objects).
FORMAT = 6
#: The modules whose objects the cache holds or whose rules produced its cached outcomes.
_CODE = ("scorers", "collectors", "daemon/modelkeeper.py", "daemon/config.py")


def path_for(db_path: Path) -> Path:
    """Where the cache of the model over ``db_path`` lives: beside it."""
    return db_path.with_name(db_path.name + ".model")


def tmp_path_for(path: Path) -> Path:
    """The temporary file :func:`save` writes before renaming it to ``path`` (a kill may leave it behind)."""
    return path.with_name(path.name + ".tmp")


#: Where the packages of ``_CODE`` are.
_ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def code_hash(root: Path = _ROOT) -> str:
    """A hash of the model's code and of the Python that pickled it (see ``_CODE``)."""
    digest = hashlib.sha256(sys.version.encode())
    for name in _CODE:
        target = root / name
        for path in sorted(target.rglob("*.py")) if target.is_dir() else [target]:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def scoring_hash(config: Config) -> str:
    """A hash of what the model's kept outcomes depend on (:func:`scorers.spec.outcome_part`; its repr: dataclasses,
    tuples, dicts in file order, no sets)."""
    return hashlib.sha256(repr(outcome_part(config)).encode()).hexdigest()[:16]


def save(feed: LiveFeed, path: Path, store_id: str) -> int:
    """Write ``feed`` to ``path`` (atomically, mode 0600), holding it still meanwhile; returns the bytes written."""
    with feed.holding() as marks:
        return save_held(feed, marks, path, store_id)


def save_held(feed: LiveFeed, marks: Marks, path: Path, store_id: str) -> int:
    """Write ``feed``, which reflects ``marks`` and which nothing changes meanwhile (its lock held, or a forked copy:
    daemon/cachewriter.py), to ``path``: a temporary file written, fsynced and renamed over it, then the folder
    fsynced, so a crash at any moment leaves the old cache or the new one; returns the bytes written."""
    tmp = tmp_path_for(path)
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            header = {"format": FORMAT, "code": code_hash(), "store": store_id, "marks": list(marks),
                      "heartbeat_top": feed.heartbeat_top, "scoring": scoring_hash(feed.config)}
            f.write(MAGIC + json.dumps(header).encode() + b"\n")
            summed = _Summed(f)
            write_feed(summed, feed)
            f.write(b"%08x\n" % summed.crc)
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)  # the rename itself survives a power cut
    finally:
        os.close(folder)
    return size


def load(path: Path, config: Config, store: Store, *, freeze: bool = False) -> LiveFeed | None:
    """The feed cached at ``path`` if it can stand for a load of ``store`` under ``config``; None (reason logged)
    when there is none or it cannot. The store is asked in one read transaction of its own.
    ``freeze``: leave every object made so far frozen out of the garbage collector, as the daemon wants after a load.
    """
    return accept(read(path, config, freeze=freeze), store)


@dataclass(frozen=True)
class CacheRead:
    """A cache file as :func:`read` found it, before the store is asked: the feed and what the header says of the
    store it was written for, or why it cannot be used (``refused``)."""

    path: Path
    started: float  # time.monotonic() as the read began
    feed: LiveFeed | None = None
    store_id: object = None
    marks: list[int] = field(default_factory=list)
    top: int = 0
    refused: str | None = None


def read(path: Path, config: Config, *, freeze: bool = False) -> CacheRead | None:
    """Read and check the cache at ``path`` in everything but the store (no connection needed: a start reads it while
    the store is checked, see ModelKeeper.prefetch); None when there is none, or one not to touch (logged: left
    where it is). Then :func:`accept` asks the store. ``freeze``: see :func:`load`."""
    started = time.monotonic()
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        log.warning("model cache %s not used: not a regular file of this user writable only by it", path)
        return None
    try:
        return _read(path, config, freeze, started)
    except Exception as exc:  # a damaged file: whatever unpickling raises, the start goes on from the store
        return CacheRead(path, started, refused=f"unreadable ({type(exc).__name__}: {exc})")


def accept(found: CacheRead | None, store: Store) -> LiveFeed | None:
    """The feed :func:`read` found, if ``store`` can catch it up (asked in one read transaction); else None, the
    reason logged. Used or not, the file is deleted: it is stale from here on."""
    if found is None:
        return None
    refused = found.refused
    if refused is None:
        with store.reading():  # one snapshot for every question asked of the store
            refused = _store_refusal(store, found.store_id, found.marks, found.top)
    found.path.unlink(missing_ok=True)
    if refused is not None or found.feed is None:
        log.info("model cache %s not used: %s; loading from the store", found.path, refused)
        return None
    log.info("model cache %s loaded in %.1f s (marks %s)", found.path, time.monotonic() - found.started,
             found.feed.marks)
    return found.feed


def _read(path: Path, config: Config, freeze: bool, started: float) -> CacheRead:
    """The cached feed, or why it cannot be used (the store aside)."""
    with path.open("rb") as f:
        header = _header(f)
        if header is None:
            return CacheRead(path, started, refused="not a model cache")
        if header.get("format") != FORMAT or header.get("code") != code_hash():
            return CacheRead(path, started, refused="written by another version of the code")
        if header.get("scoring") != scoring_hash(config):  # known before unpickling it (equality is checked after)
            return CacheRead(path, started, refused="the configuration the model reads has changed")
        marks, top = header.get("marks"), header.get("heartbeat_top")
        if not isinstance(marks, list) or len(marks) != 4 or not isinstance(top, int) or not all(
                isinstance(m, int) for m in marks):
            return CacheRead(path, started, refused="not a model cache")
        summed = _Summed(f)
        feed = read_feed(summed, freeze=freeze)
        if f.readline(16) != b"%08x\n" % summed.crc:
            return CacheRead(path, started, refused="damaged (its checksum does not match)")
    if not isinstance(feed, LiveFeed) or list(feed.marks) != marks or feed.heartbeat_top != top:
        return CacheRead(path, started, refused="its contents do not match its header")
    if not feed.adopt(config):
        return CacheRead(path, started, refused="the configuration the model reads has changed, or a longer window"
                                                " reaches records it let go")
    return CacheRead(path, started, feed, header.get("store"), marks, top)


def _store_refusal(store: Store, store_id: object, marks: list[int], top: int) -> str | None:
    """Why ``store`` cannot catch a model up from these marks (None: it can)."""
    if store_id != store.store_id():
        return "written for another store"
    # What only grows: heartbeat rows, labels, checks and the feed's seq (the largest event rowid does not: a
    # Markdown row removed from the top hands its rowid out again). A store restored from an older copy is behind.
    current = store.feed_marks()
    now = [store.heartbeat_top(current[0]), *current[1:]]
    if any(m > c for m, c in zip([top, *marks[1:]], now, strict=True)):
        return f"it is ahead of the store (heartbeat row, label, check, change: {[top, *marks[1:]]} > {now})"
    if not store.feed_kept_after(marks[3]):
        return "the store's change feed was pruned past its marks (the daemon ran on after writing it)"
    return None


class _Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...

    def readline(self, size: int = -1, /) -> bytes: ...


class _Summed:
    """A file that keeps a CRC-32 of what is written to it or read from it: a byte changed on disk inside a string
    would unpickle without complaint (pickle has no checksum of its own)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.crc = 0

    def write(self, data: bytes) -> int:
        self.crc = zlib.crc32(data, self.crc)
        return self._f.write(data)

    def read(self, size: int = -1) -> bytes:
        data = self._f.read(size)
        self.crc = zlib.crc32(data, self.crc)
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self._f.readline(size)
        self.crc = zlib.crc32(data, self.crc)
        return data


class _Positions:
    """The positions of objects in a list, found by the objects' addresses: the addresses sorted, in machine
    integers, beside the position each stands for (16 bytes an object).

    A dict from id() to position would hold a key and a value object per entry, and its table, for every record and
    time while the stopping daemon writes the cache (docs/performance.md: the model cache). The price is time: a
    lookup bisects machine integers, boxing each one it compares.
    """

    def __init__(self, objects: Sequence[object], first: int) -> None:
        addresses = array("Q", map(id, objects))
        order = sorted(range(len(addresses)), key=addresses.__getitem__)
        self.addresses = array("Q", map(addresses.__getitem__, order))
        self.positions = array("Q", order)
        self.first = first

    def get(self, obj: object) -> int | None:
        """``first`` + the position of ``obj`` itself (not of an equal object) in ``objects``; None if absent."""
        address = id(obj)
        addresses = self.addresses
        i = bisect.bisect_left(addresses, address)
        return self.first + self.positions[i] if i < len(addresses) and addresses[i] == address else None


#: The classes of the records the model holds, written as columns (by position in this tuple), and each one's
#: columns: the fields of its tuple, in order.
RECORD_TYPES: tuple[type, ...] = (Packed, Stub)
_COLUMNS: tuple[tuple[str, ...], ...] = (PACKED_LAYOUT, Stub._fields)


def pack_records(records: Iterable[Record]) -> tuple[list[Record], Iterator[Any]]:
    """``records`` in the order the columns give them (decisions, then stubs), and the columns, made one at a time:
    per slot of :class:`Packed`, then per field of :class:`Stub`, a list of the values (times as microseconds in
    machine integers). Pickled record by record, each would leave its constructor's arguments and its time's in the
    pickler's memo until the end: twice the model's size while writing, and a fragmented heap after reading.
    """
    records = list(records)
    groups: tuple[list[Record], ...] = tuple([r for r in records if type(r) is cls] for cls in RECORD_TYPES)
    if sum(map(len, groups)) != len(records):  # a record of another class would be left out of the file
        raise TypeError(f"the model holds records other than {', '.join(c.__name__ for c in RECORD_TYPES)}")

    def columns() -> Iterator[Any]:
        for group, names in zip(groups, _COLUMNS, strict=True):
            for k, f in enumerate(names):
                values = list(map(operator.itemgetter(k), group))
                yield array("q", map(to_us, values)) if f == "ts" else values

    return [r for group in groups for r in group], columns()


def unpack_records(columns: Iterator[Any]) -> list[Record]:
    """The records of :func:`pack_records`, from its columns, in its order; line numbers shared again (one int
    object per number, as the model keeps them). Built by C-level maps."""
    lines: dict[int | None, int | None] = {}
    out: list[Record] = []
    for cls, names in zip(RECORD_TYPES, _COLUMNS, strict=True):
        c = {f: next(columns) for f in names}
        c["ts"] = from_us_many(c["ts"])
        c["line"] = list(map(lines.setdefault, c["line"], c["line"]))
        out += map(tuple.__new__, itertools.repeat(cls),  # tuple.__new__(cls, row)
                   zip(*(c[f] for f in names), strict=True))
    return out


# What the model holds that pickle must not write as it is: maps keyed by id() (an unpickled record has another
# id), maps keyed by the records' ids (their strings would come back as second copies), its counter (itertools
# objects do not pickle on every Python), and the cache of shared values (it starts empty: refilled as records come).


def _reduce_by_id(m: ById[Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return _by_id, (list(m.values()),)


def _by_id(values: list[Any]) -> ById[Any]:
    return ById((id(v), v) for v in values)


def _reduce_by_record_id(m: ByRecordId[Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return _by_record_id, (list(m.values()),)


def _by_record_id(values: list[Any]) -> ByRecordId[Any]:
    return ByRecordId((v.id, v) for v in values)


def _reduce_count(c: itertools.count[int]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return itertools.count, (next(c),)  # the copy counts on from a value the original no longer gives


def _reduce_model(model: LiveModel) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    state = vars(model).copy()
    winners: dict[str, Record] = state["_winner"]
    state["_winner"] = list(winners.values())
    state["_shadowed"] = list(state["_shadowed"].values())
    state["_shared"] = {}
    # Each id filed by day as the record it names, where one is held: as a string it would come back a second copy
    # of the record's own id.
    state["_days"] = {d: [winners.get(i, i) for i in ids] for d, ids in state["_days"].items()}
    # Likewise the labelled ids: the labels' decisions, the map of their slots, each agent's latest label.
    columns = copy.copy(state["_label_columns"])
    columns.decision = [None if i is None else winners.get(i, i) for i in columns.decision]
    state["_label_columns"] = columns
    state["_labels"] = [(winners.get(i, i), held) for i, held in state["_labels"].items()]
    agents = {}
    for name, a in state["_agents"].items():
        agents[name] = a = copy.copy(a)
        a.labelled = [(winners.get(i, i), slot) for i, slot in a.labelled.items()]
    state["_agents"] = agents
    return _model, (state,)


def _id_of(i: Any) -> Any:
    """An id as :func:`_reduce_model` wrote it (a string, or the record whose id it is) back as a string."""
    return i if i is None or type(i) is str else i.id


def _model(state: dict[str, Any]) -> LiveModel:
    state["_winner"] = dict(zip(map(attrgetter("id"), state["_winner"]), state["_winner"], strict=True))
    state["_shadowed"] = {rest[0].id: rest for rest in state["_shadowed"] if rest}
    state["_days"] = {d: [r if type(r) is str else r.id for r in rs] for d, rs in state["_days"].items()}
    state["_label_columns"].decision = list(map(_id_of, state["_label_columns"].decision))
    state["_labels"] = {_id_of(i): held for i, held in state["_labels"]}
    for a in state["_agents"].values():
        a.labelled = {_id_of(i): slot for i, slot in a.labelled}
    model = LiveModel.__new__(LiveModel)
    vars(model).update(state)
    return model


_REDUCERS: dict[type, Callable[[Any], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    ById: _reduce_by_id, ByRecordId: _reduce_by_record_id, itertools.count: _reduce_count, LiveModel: _reduce_model,
}


class _RecordPickler(pickle.Pickler):
    """Pickles the feed with each record, and each record's time, as its position in ``records`` (written before,
    as columns: see :func:`pack_records`); the indexes hold those very objects, so they are references. The model's
    own objects go through ``_REDUCERS``.
    """

    def __init__(self, f: _Writable, records: list[Any]) -> None:
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.dispatch_table = {**copyreg.dispatch_table, **_REDUCERS}
        self._records = _Positions(records, 0)
        # A time (positions n, n + 1, …) shared by the indexes with its record (a repeat's previous answer, the
        # sorted times of state changes and prompts) stays one object after loading, as it was.
        self._times = _Positions(list(map(attrgetter("ts"), records)), len(records))

    def persistent_id(self, obj: Any) -> int | None:
        kind = type(obj)  # called for every object pickled, millions of times: only records and times are looked up
        if kind is datetime:
            return self._times.get(obj)
        return self._records.get(obj) if kind in RECORD_TYPES else None


def write_feed(f: _Writable, feed: LiveFeed) -> None:
    """Pickle ``feed``: its records as columns, then the feed with references to them (hold the feed still)."""
    records, columns = pack_records(feed.model.records())
    for column in columns:  # one at a time, each with a memo of its own: what writing costs stays one column
        pickle.dump(column, f, protocol=pickle.HIGHEST_PROTOCOL)
    _RecordPickler(f, records).dump(feed)


def read_feed(f: _Readable, *, freeze: bool = False) -> Any:
    """What :func:`write_feed` wrote (no check whatever: see :func:`load`); ``freeze``: see daemon.gcpolicy.paused."""
    with gcpolicy.paused(freeze=freeze):
        records = unpack_records(iter(functools.partial(pickle.load, f), None))
        # Position i < n is record i, n + i its time (see _RecordPickler): a list's own lookup resolves a reference
        # without a call into Python, millions of them per load.
        targets = [*records, *map(attrgetter("ts"), records)]
        unpickler = pickle.Unpickler(f)
        unpickler.persistent_load = targets.__getitem__  # type: ignore[method-assign]
        return unpickler.load()


def _header(f: IO[bytes]) -> dict[str, Any] | None:
    if f.read(len(MAGIC)) != MAGIC:
        return None
    try:
        header = json.loads(f.readline(4096))
    except ValueError:
        return None
    return header if isinstance(header, dict) else None
