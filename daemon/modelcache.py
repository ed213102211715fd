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

import copyreg
import functools
import gc
import hashlib
import itertools
import json
import logging
import os
import pickle
import stat
import sys
import time
import zlib
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from daemon import gcpolicy, lifecycle
from daemon.config import Config
from daemon.modelkeeper import LiveFeed, Marks
from daemon.store import Store
from scorers.live import LiveModel
from scorers.spec import outcome_part

log = logging.getLogger("honestyd")

MAGIC = b"honestyd-model-cache\n"
#: Bumped when the file's layout changes (the code hash covers the pickled objects).
FORMAT = 9
#: The modules whose objects the cache holds or whose rules produced its cached outcomes.
_CODE = ("scorers", "collectors", "daemon/modelkeeper.py", "daemon/config.py")


def path_for(db_path: Path) -> Path:
    """Where the cache of the model over ``db_path`` lives: beside it."""
    return lifecycle.cache_path_for(db_path)


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


def load(path: Path, config: Config, store: Store) -> LiveFeed | None:
    """The feed cached at ``path`` if it can stand for a load of ``store`` under ``config``; None (reason logged)
    when there is none or it cannot. The store is asked in one read transaction of its own."""
    return accept(read(path, config), store)


@dataclass
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


def read(path: Path, config: Config) -> CacheRead | None:
    """Read and check the cache at ``path`` in everything but the store (no connection needed: a start reads it while
    the store is checked, see ModelKeeper.prefetch); None when there is none, or one not to touch (logged: left
    where it is). Then :func:`accept` asks the store. Nothing read is frozen out of the garbage collector here: a
    model refused is to be collected (the caller freezes the model it keeps)."""
    started = time.monotonic()
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        log.warning("model cache %s not used: not a regular file of this user writable only by it", path)
        return None
    try:
        return _read(path, config, started)
    except Exception as exc:  # a damaged file: whatever unpickling raises, the start goes on from the store
        return CacheRead(path, started, refused=f"unreadable ({type(exc).__name__}: {exc})")


def accept(found: CacheRead | None, store: Store) -> LiveFeed | None:
    """The feed :func:`read` found, if ``store`` can catch it up (asked in one read transaction); else None, the
    reason logged. Used or not, the file is deleted: it is stale from here on. The feed is taken out of ``found``:
    a refused one is freed before the load from the store begins, which would otherwise hold both."""
    if found is None:
        return None
    refused = found.refused
    if refused is None:
        with store.reading():  # one snapshot for every question asked of the store
            refused = _store_refusal(store, found.store_id, found.marks, found.top)
    found.path.unlink(missing_ok=True)
    feed, found.feed = found.feed, None
    if refused is not None or feed is None:
        log.info("model cache %s not used: %s; loading from the store", found.path, refused)
        if feed is not None:
            del feed
            gc.collect()  # the refused model's cycles, now
        return None
    log.info("model cache %s loaded in %.1f s (marks %s)", found.path, time.monotonic() - found.started,
             feed.marks)
    return feed


def _read(path: Path, config: Config, started: float) -> CacheRead:
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
        feed = read_feed(summed)
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


def _array(typecode: str, data: bytearray) -> array[Any]:
    """An array of ``typecode`` holding ``data`` (how :class:`_ModelPickler` writes one)."""
    out = array(typecode)
    out.frombytes(data)
    data.clear()  # the unpickler's memo holds ``data`` until the whole file is read: the model's columns twice
    return out


def _reduce_count(c: itertools.count[int]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    return itertools.count, (next(c),)  # the copy counts on from a value the original no longer gives


def _reduce_model(model: LiveModel) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    state = vars(model).copy()
    state["_shared"] = {}  # values computed once (prompt keys): computed again as asked
    return _model, (state,)


def _model(state: dict[str, Any]) -> LiveModel:
    model = LiveModel.__new__(LiveModel)
    vars(model).update(state)
    return model


_REDUCERS: dict[type, Callable[[Any], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    itertools.count: _reduce_count, LiveModel: _reduce_model,
}


class _ModelPickler(pickle.Pickler):
    """Pickles the feed: the model is columns (scorers/live/table.py), each array written straight from its buffer
    (no bytes copy of it kept in the pickler's memo until the end: the model's size again while writing); its counter
    and the values it computes again go through ``_REDUCERS``."""

    def __init__(self, f: _Writable) -> None:
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self.dispatch_table = {**copyreg.dispatch_table, **_REDUCERS}

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is array:
            return _array, (obj.typecode, pickle.PickleBuffer(obj))
        return NotImplemented


def write_feed(f: _Writable, feed: LiveFeed) -> None:
    """Pickle ``feed`` (hold the feed still meanwhile)."""
    _ModelPickler(f).dump(feed)


def read_feed(f: _Readable, *, freeze: bool = False) -> Any:
    """What :func:`write_feed` wrote (no check whatever: see :func:`load`); ``freeze``: see daemon.gcpolicy.paused."""
    with gcpolicy.paused(freeze=freeze):
        return pickle.Unpickler(f).load()


def _header(f: IO[bytes]) -> dict[str, Any] | None:
    if f.read(len(MAGIC)) != MAGIC:
        return None
    try:
        header = json.loads(f.readline(4096))
    except ValueError:
        return None
    return header if isinstance(header, dict) else None
