"""Model-based test of exactly-once ingestion: a hypothesis state machine drives the real Ingester over a real state
directory and a real SQLite file and compares the store with a model after every step.

The system under test is :class:`daemon.ingest.Ingester` with :meth:`Store.open` on a file, in-process, with an
injected clock. The rules are what writers, logrotate and editors do to the files between two passes:

* heartbeat logs (two of them): append complete lines (valid events with unique ids or with no id, CRLF sometimes,
  and malformed lines of every kind, 1 MiB+ ones included); append a partial line (no newline) that a later rule
  completes, on whichever file the writer still holds (even after that file was rotated away); rename rotation
  (``log`` → ``log.N``, the next append creates a new ``log``); copytruncate (copy to ``log.N``, truncate to 0);
  truncate; delete (also of rotated copies); recreate;
* briefs: create, edit (in place, or atomically through a dot temp file and ``os.replace``), delete, with valid,
  missing or invalid front-matter ``ts`` (and in :class:`LinkMachine`, a symlink ``latest → briefs`` made and removed,
  with texts citing paths through it: spec 1, v2.3, they name the briefs' own entries);
* the daemon: ``scan()``; restart (close and reopen Store and Ingester); and **kill**: a fault injected at the k-th
  write of a scan (the transaction rolls back, as a SIGKILL would leave it), the Store abandoned without closing,
  then a new Store and Ingester that scan at start, as the daemon does. A real SIGKILL of a real process is
  ``tests/system/test_crash_safety.py``;
* the daemon's model (daemon/modelcache.py): write the model cache (a clean stop), prune the change feed the model
  applied (what the running daemon does once a minute), and start from the last cache written, however much was
  ingested since: it must be used exactly when the feed still holds every change after its marks, and the model it
  gives must then score what a from-scratch evaluation scores (the invariant below), rewritten briefs included.

The model knows, per log, which physical file the cursor follows, the byte offset it read to and what the cursor
keeps to recognise that file again (its first min(1 KiB, offset) bytes and the 64 bytes before the offset, as
docs/reliability.md documents), and says which lines any correct ingester must store. After every step:

* the events stored from logs are exactly the complete valid lines the model says were read (multiset of (id, text)),
  none twice; the rejects are exactly the complete malformed lines read (multiset of (reason, snippet));
* every (path, generation) holds lines 1..n with no gap, and no line is both an event and a reject;
* the briefs in the store (id, text) are exactly the valid briefs on disk, and the rejected briefs are the ones on disk
  with an invalid ``ts``;
* after a scan, the non-deleted entries of the file index are exactly the files on disk.

What the model (like any tailer without a watcher) cannot promise, and so does not expect, is what
``docs/reliability.md`` ("What is not promised") documents: lines still unread when their file is truncated,
copytruncated or deleted are gone; lines a writer adds to a rotated file after the ingester moved on to the new log are
not read; two rotations between passes lose the generation in the middle (a truncation or a copytruncate followed by
a rename before a pass is such a pair: the rotated file no longer holds what the cursor read, so it is not recognised
and not drained); a file rewritten with the same first bytes as those read (a blank line, here) looks like an append;
a rotated name that also matches the heartbeats glob would be read again under that name (never generated here:
rotation uses ``.N``). The model computes these outcomes rather than avoiding the sequences, so the machine still
checks that nothing else is lost or read twice around them; ``test_the_model_expects_the_documented_limits`` pins each
one as a fixed sequence (the store's contents, not just agreement with the model). Deleted files are moved to a
graveyard outside the root rather than unlinked, so no inode is reused within a run and every outcome is
deterministic; inode reuse has its own deterministic tests in ``tests/daemon/ingest/test_scenarios.py``.

Size: 300 examples of up to 60 steps per machine, derandomized (the same sequences on every run, no example database;
hypothesis' draws from the project's own literals are turned off in ``tests/conftest.py``, so earlier tests and the
checkout's path do not change them). Coverage and timings: docs/reliability.md, "How tests/daemon/ingest/test_model.py
works".
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from collectors.jsonl import MAX_LINE_BYTES, snippet, strip_ending
from collectors.statedir import walk
from daemon import modelcache
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.modelkeeper import LiveFeed
from daemon.store import Store
from scorers.context import Context
from scorers.score import evaluate_window, to_json

LOGS = ("heartbeats/a.jsonl", "heartbeats/b.jsonl")
BRIEFS = ("briefs/ted-1.md", "briefs/ada_2.md", "briefs/iris.md")
TS = "2026-05-31T03:40:00Z"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
KINDS = ("dm", "refusal", "commit", "note", "brief")
MALFORMED = ("not_json", "not_object", "missing_ts", "missing_agent", "missing_kind", "bad_ts", "not_utf8", "blank",
             "oversized")

TEXTS = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=24),  # no lone surrogates: see test_hostile.py
    st.sampled_from(
        ["see Issue #12 because", "[source:docs/a.md] https://x.example/a/b.", "no data yet", "ünï ✓ 漢字",
         "see [source:latest/ted-1.md]", "no data yet: [source:latest/iris.md]"]
    ),
)


def note(what: str) -> None:
    """Count ``what`` in hypothesis' statistics (``--hypothesis-show-statistics``); outside a hypothesis test (the
    fixed sequences below) there is nothing to count it in."""
    if currently_in_test_context():
        event(what)


class Crash(Exception):
    """The injected fault: raised from inside a store write, like a SIGKILL between two statements."""


#: How a cursor recognises its file (docs/reliability.md, truncate and "Fingerprint collisions"): the first
#: min(1 KiB, offset) bytes and the 64 bytes before the offset must be unchanged.
HEAD_BYTES, MARKER_BYTES = 1024, 64


@dataclass(eq=False)
class PhysFile:
    """One inode of the model: its complete lines and, while a writer is mid-line, the bytes still to come."""

    lines: list[bytes] = field(default_factory=list)
    partial: tuple[bytes, bytes] | None = None  # (written head, bytes still to come) of a line being written

    def chunks(self) -> list[bytes]:
        """The file's bytes as written: its complete lines, then the head of a line being written."""
        return [*self.lines, *([self.partial[0]] if self.partial is not None else [])]

    def size(self) -> int:
        return sum(map(len, self.chunks()))

    def complete(self) -> int:
        """Bytes up to the end of the last complete line."""
        return sum(map(len, self.lines))

    def span(self, start: int, end: int) -> bytes:
        """The bytes ``[start, end)`` of the file as it is on disk."""
        out, pos = [], 0
        for chunk in self.chunks():
            if pos >= end:
                break
            if pos + len(chunk) > start:
                out.append(chunk[max(start - pos, 0):end - pos])
            pos += len(chunk)
        return b"".join(out)

    def lines_from(self, offset: int) -> list[bytes]:
        """The complete lines a reader starting at byte ``offset`` gets."""
        out, pos = [], 0
        for line in self.lines:
            if pos + len(line) > offset:
                out.append(line[max(offset - pos, 0):])
            pos += len(line)
        return out


@dataclass(eq=False)
class Track:
    """The model of one log's cursor: the physical file it follows, the byte offset read to, and what it keeps to
    recognise that file again: its first min(1 KiB, offset) bytes and the 64 bytes before the offset."""

    file: PhysFile
    offset: int = 0
    head: bytes = b""
    marker: bytes = b""

    def matches(self, phys: PhysFile) -> bool:
        """``phys`` still holds what this cursor read: an append, not a truncation or a rewrite."""
        return phys.size() >= self.offset and phys.span(0, len(self.head)) == self.head and \
            phys.span(self.offset - len(self.marker), self.offset) == self.marker

    def advance(self, end: int) -> None:
        self.offset = end
        self.head = self.file.span(0, min(HEAD_BYTES, end))
        self.marker = self.file.span(end - min(MARKER_BYTES, end), end)


class Clock:
    """The injected clock; every scan moves it on by a second."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def valid_line(n: int, *, with_id: bool, kind: str, text: str, crlf: bool) -> bytes:
    obj: dict[str, Any] = {"n": n}  # first key: every line's first bytes are unique, so heads never collide
    if with_id:
        obj["id"] = f"e{n}"
    obj.update(ts=TS, agent=f"agent{n % 3}", kind=kind, text=text)
    return json.dumps(obj, ensure_ascii=False).encode() + (b"\r\n" if crlf else b"\n")


def malformed_line(n: int, reason: str) -> bytes:
    bodies: dict[str, bytes] = {
        "not_json": f"{{broken n={n};".encode(),
        "not_object": f"[{n}, 1]".encode(),
        "missing_ts": json.dumps({"n": n, "agent": "a", "kind": "dm"}).encode(),
        "missing_agent": json.dumps({"n": n, "ts": TS, "kind": "dm", "agent": ""}).encode(),
        "missing_kind": json.dumps({"n": n, "ts": TS, "agent": "a"}).encode(),
        "bad_ts": json.dumps({"n": n, "ts": "2026-05-31T03:40:00", "agent": "a", "kind": "dm"}).encode(),
        "not_utf8": b'{"n": %d, "agent": "\xff\xfe", "kind": "dm"}' % n,
        "blank": b"",
        "oversized": b'{"n": %d, "text": "' % n + b"x" * (MAX_LINE_BYTES + 64) + b'"}',
    }
    return bodies[reason] + b"\n"


EXPECTED_REASON = {"blank": "not_json", "missing_agent": "missing_agent"}


def expected_of(line: bytes) -> tuple[str, tuple[str, str]]:
    """What a correct ingester makes of one complete line: ("event", (id, text)) or ("reject", (reason, snippet)).

    The model's own reading of the spec (1.1), independent of the parser: the line's shape is known from how the
    test built it (valid lines carry ``"kind"`` and a ``"ts"`` of TS; malformed ones are recognised by content).
    """
    data = strip_ending(line)
    if len(data) > MAX_LINE_BYTES:
        return "reject", ("oversized", snippet(data))
    try:
        obj = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return "reject", ("not_utf8", snippet(data))
    except json.JSONDecodeError:
        return "reject", ("not_json", snippet(data))
    if not isinstance(obj, dict):
        return "reject", ("not_object", snippet(data))
    for key in ("ts", "agent", "kind"):
        if not obj.get(key):
            return "reject", (f"missing_{key}", snippet(data))
    if obj["ts"] != TS:
        return "reject", ("bad_ts", snippet(data))
    eid = obj.get("id") or hashlib.sha256(data).hexdigest()[:16]
    return "event", (eid, obj.get("text", ""))


class IngestMachine(RuleBasedStateMachine):
    """Files on disk + the real Ingester and Store, against a model of what must be stored."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="honestyd-model-"))
        self.root = self.tmp / "state"
        (self.root / "heartbeats").mkdir(parents=True)
        (self.root / "briefs").mkdir()
        self.graveyard = self.tmp / "graveyard"  # deleted files live on here: no inode is reused in a run
        self.graveyard.mkdir()
        self.db = self.tmp / "db.sqlite"
        self.clock = Clock()
        self.abandoned: list[Store] = []
        self.store = Store.open(self.db)
        self.ingester = Ingester(self.store, self.root, Config(), clock=self.clock)
        self.feed = LiveFeed(Config())  # the daemon's scoring model, kept across restarts like a long-lived reader
        self.feed.load(self.store)
        self.cache = self.tmp / "db.sqlite.model"
        self.cached: tuple[int, int, int, int] | None = None  # the marks of the last model cache written
        self.pruned = 0  # the change feed was pruned up to this seq (the daemon prunes what its model applied)
        # --- the model
        self.n = 0  # unique line number across the run
        self.rot = 0  # rotation suffix counter
        self.buried = 0
        self.names: dict[str, PhysFile] = {}  # heartbeats/* path → physical file
        self.tracks: dict[str, Track] = {}
        self.events: Counter[tuple[str, str]] = Counter()
        self.rejects: Counter[tuple[str, str]] = Counter()
        self.briefs: dict[str, tuple[str, str]] = {}  # path → ("event", body) or ("reject", "bad_ts")
        self.briefs_scanned: dict[str, tuple[str, str]] = {}  # the briefs as the last pass saw them
        self.scanned = False
        self.steps = 0

    def teardown(self) -> None:
        for store in [*self.abandoned, self.store]:
            store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- helpers

    def next_n(self) -> int:
        self.n += 1
        return self.n

    def on_disk(self, phys: PhysFile) -> bool:
        return any(p is phys for p in self.names.values())

    def write(self, rel: str, data: bytes) -> None:
        with open(self.root / rel, "ab") as f:
            f.write(data)

    def bury(self, rel: str) -> None:
        """Delete ``rel`` from the root without freeing its inode."""
        self.buried += 1
        os.rename(self.root / rel, self.graveyard / str(self.buried))

    def live(self, log: str) -> PhysFile:
        phys = self.names.get(log)
        if phys is None:
            phys = self.names[log] = PhysFile()
        return phys

    def model_read(self, track: Track) -> None:
        """The cursor reads its file's complete lines from its offset on."""
        for line in track.file.lines_from(track.offset):
            what, key = expected_of(line)
            (self.events if what == "event" else self.rejects)[key] += 1
        track.advance(max(track.file.complete(), track.offset))

    def model_scan(self) -> None:
        """What one pass must read: drain the followed file wherever it now is, then follow the live log.

        A file that no longer holds what its cursor read was truncated or rewritten: at the log's name it is read again
        from 0 (a new generation); rotated away before a pass saw that, it is not recognised and never drained (docs:
        "Two rotations between passes", the rewritten generation being the one in the middle).
        """
        self.briefs_scanned = dict(self.briefs)
        for log in LOGS:
            live = self.names.get(log)
            track = self.tracks.get(log)
            if track is not None and track.file is not live:
                if self.on_disk(track.file) and track.matches(track.file):
                    if track.file.complete() > track.offset:
                        note("drained unread lines of a file rotated away")
                    self.model_read(track)
                elif self.on_disk(track.file) and track.file.complete() > 0:
                    note("rewritten, then rotated away before a pass (lost by design)")
                if live is None:
                    continue  # the cursor stays on the old file: it is drained again next pass
                track = None
            if live is None:
                continue
            if track is None or not track.matches(live):
                track = self.tracks[log] = Track(live)  # new, or truncated or rewritten: from 0
            self.model_read(track)

    def real_scan(self) -> None:
        self.clock.now += timedelta(seconds=1)
        self.ingester.scan()

    def reopen(self) -> None:
        self.store = Store.open(self.db)
        self.ingester = Ingester(self.store, self.root, Config(), clock=self.clock)

    # --- heartbeat rules

    @rule(log=st.sampled_from(LOGS), lines=st.lists(
        st.one_of(
            st.tuples(st.just("valid"), st.booleans(), st.sampled_from(KINDS), TEXTS, st.booleans()),
            st.tuples(st.just("bad"), st.sampled_from(MALFORMED)),
        ), min_size=1, max_size=4))
    def append_lines(self, log: str, lines: list[tuple[Any, ...]]) -> None:
        phys = self.names.get(log)
        if phys is not None and phys.partial is not None:
            # A writer mid-line: finish it first (two writers never interleave within a line).
            self.complete_partial_of(log)
        phys = self.live(log)
        chunk = []
        for spec in lines:
            n = self.next_n()
            if spec[0] == "valid":
                _, with_id, kind, text, crlf = spec
                chunk.append(valid_line(n, with_id=with_id, kind=kind, text=text, crlf=crlf))
            else:
                chunk.append(malformed_line(n, spec[1]))
        self.write(log, b"".join(chunk))
        phys.lines.extend(chunk)

    @rule(log=st.sampled_from(LOGS), text=TEXTS, cut=st.floats(0, 1))
    def append_partial(self, log: str, text: str, cut: float) -> None:
        phys = self.names.get(log)
        if phys is not None and phys.partial is not None:
            return
        phys = self.live(log)
        line = valid_line(self.next_n(), with_id=True, kind="dm", text=text, crlf=False)
        k = 1 + int(cut * (len(line) - 2))  # 1 ≤ k ≤ len - 1: the newline is never written here
        self.write(log, line[:k])
        phys.partial = (line[:k], line[k:])

    def complete_partial_of(self, rel: str) -> None:
        phys = self.names[rel]
        assert phys.partial is not None
        head, rest = phys.partial
        if rel not in LOGS:
            note("completed a partial line on a rotated file")
        self.write(rel, rest)
        phys.lines.append(head + rest)
        phys.partial = None

    @rule(data=st.data())
    def complete_partial(self, data: st.DataObject) -> None:
        """The writer finishes its line on the file it holds, wherever that file now is (maybe rotated)."""
        pending = [rel for rel, p in sorted(self.names.items()) if p.partial is not None]
        if not pending:
            return
        rel = data.draw(st.sampled_from(pending))
        self.complete_partial_of(rel)

    @rule(log=st.sampled_from(LOGS))
    def rotate_rename(self, log: str) -> None:
        if log not in self.names:
            return
        self.rot += 1
        rotated = f"{log}.{self.rot}"  # ".N" does not match heartbeats/*.jsonl
        os.rename(self.root / log, self.root / rotated)
        self.names[rotated] = self.names.pop(log)

    @rule(log=st.sampled_from(LOGS))
    def copytruncate(self, log: str) -> None:
        phys = self.names.get(log)
        if phys is None:
            return
        self.rot += 1
        rotated = f"{log}.{self.rot}"
        shutil.copyfile(self.root / log, self.root / rotated)
        self.names[rotated] = PhysFile(list(phys.lines))  # a new inode no cursor follows
        self._truncate(log, phys)

    @rule(log=st.sampled_from(LOGS))
    def truncate(self, log: str) -> None:
        phys = self.names.get(log)
        if phys is not None:
            self._truncate(log, phys)

    def _truncate(self, log: str, phys: PhysFile) -> None:
        for track in self.tracks.values():
            if track.file is phys and phys.complete() > track.offset:
                note("truncated with unread lines (lost by design)")
        os.truncate(self.root / log, 0)
        phys.lines.clear()
        phys.partial = None  # the writer gives its half line up with the bytes; the cursors find out at a pass

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        """Delete a live log or a rotated copy."""
        if not self.names:
            return
        rel = data.draw(st.sampled_from(sorted(self.names)))
        self.bury(rel)
        self.names.pop(rel).partial = None

    @rule(log=st.sampled_from(LOGS))
    def recreate(self, log: str) -> None:
        """An empty log appears where there was none (a writer opening it in append mode)."""
        if log in self.names:
            return
        (self.root / log).touch()
        self.names[log] = PhysFile()

    # --- briefs

    @rule(path=st.sampled_from(BRIEFS), body=TEXTS, front=st.sampled_from(["none", "valid", "bad_ts", "no_ts"]),
          atomic=st.booleans())
    def write_brief(self, path: str, body: str, front: str, atomic: bool) -> None:
        body = f"Brief {self.next_n()}: {body}\n"  # unique, so an edit always changes the content
        head = {
            "none": "",
            "valid": "---\nagent: ted\nts: 2026-05-30T10:00:00Z\nthread: t1\n---\n",
            "bad_ts": "---\nagent: ted\nts: last tuesday\n---\n",
            "no_ts": "---\nagent: ted\nsubject: a.md, b.md\n---\n",
        }[front]
        target = self.root / path
        if atomic:
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_text(head + body, encoding="utf-8")
            os.replace(tmp, target)
        else:
            target.write_text(head + body, encoding="utf-8")
        self.briefs[path] = ("reject", "bad_ts") if front == "bad_ts" else ("event", body)

    @rule(path=st.sampled_from(BRIEFS))
    def delete_brief(self, path: str) -> None:
        if path in self.briefs:
            (self.root / path).unlink()
            del self.briefs[path]

    # --- the daemon

    @rule()
    def scan(self) -> None:
        self.real_scan()
        self.model_scan()
        self.scanned = True

    @rule()
    def restart(self) -> None:
        self.store.close()
        self.reopen()

    @rule(k=st.integers(1, 6), method=st.sampled_from(
        ["add_events", "add_rejects", "put_cursor", "put_file", "add_file_change", "remove_document"]))
    def kill_mid_scan_then_restart(self, k: int, method: str) -> None:
        """A fault at the k-th call of one store write, the Store abandoned unclosed, then restart and scan."""
        calls = 0
        original: Callable[..., Any] = getattr(self.store, method)

        def faulty(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == k:
                raise Crash(f"{method} #{k}")
            return original(*args, **kwargs)

        setattr(self.store, method, faulty)
        try:
            self.real_scan()
            note("kill rule: scan finished before the fault")
        except Crash:
            note("kill rule: fault injected mid-scan")
        self.abandoned.append(self.store)  # never closed until teardown: as if the process had died
        self.reopen()
        self.real_scan()  # the daemon scans at start
        self.model_scan()
        self.scanned = True

    # --- the daemon's model cache (daemon/modelcache.py)

    @rule()
    def write_model_cache(self) -> None:
        """The daemon stops cleanly: its model is written beside the store."""
        modelcache.save(self.feed, self.cache, self.store.store_id())
        self.cached = self.feed.marks

    @rule()
    def prune_the_applied_feed(self) -> None:
        """What the running daemon does once a minute: drop the change feed its model has applied."""
        self.feed.sync(self.store)
        with self.store.atomic():
            self.store.prune_changes(self.feed.marks[3])
        self.pruned = max(self.pruned, self.feed.marks[3])

    @rule()
    def start_from_the_model_cache(self) -> None:
        """The daemon starts with the last cache written, however much was ingested since: it is used exactly when
        the feed still holds every change after its marks, and then catches up like a running model (checked by
        ``live_model_matches_store``); otherwise the model is built from the store.
        """
        if self.cached is None:
            return
        copy = self.tmp / "start.model"
        shutil.copyfile(self.cache, copy)
        os.chmod(copy, 0o600)
        loaded = modelcache.load(copy, Config(), self.store)
        assert not copy.exists(), "a cache is read once"
        assert (loaded is not None) == (self.pruned <= self.cached[3]), (self.pruned, self.cached)
        if loaded is None:
            note("model cache refused: the feed was pruned past its marks")
            loaded = LiveFeed(Config())
            loaded.load(self.store)
        else:
            note("model cache used" + (" after later ingest" if self.cached != self.store.feed_marks() else ""))
        self.feed = loaded

    # --- the comparison

    @invariant()
    def store_matches_model(self) -> None:
        conn = self.store.conn
        rows = conn.execute("SELECT path, generation, line, id, text FROM events WHERE line > 0").fetchall()
        stored = Counter((i, t) for _, _, _, i, t in rows)
        assert stored == self.events, _diff("events", stored, self.events)
        ids = Counter(i for _, _, _, i, _ in rows)
        assert not [i for i, c in ids.items() if c > 1], "an event was stored twice"
        rejects = conn.execute(
            "SELECT path, generation, line, reason, snippet FROM rejects WHERE line > 0").fetchall()
        stored_rejects = Counter((r, s) for _, _, _, r, s in rejects)
        assert stored_rejects == self.rejects, _diff("rejects", stored_rejects, self.rejects)
        # Every read line has exactly one outcome, and the lines of a generation have no gap.
        keys = [(p, g, n) for p, g, n, _, _ in rows] + [(p, g, n) for p, g, n, _, _ in rejects]
        assert len(keys) == len(set(keys)), "a line is both an event and a reject"
        by_generation: dict[tuple[str, int], set[int]] = {}
        for p, g, n in keys:
            by_generation.setdefault((p, g), set()).add(n)
        for key, numbers in by_generation.items():
            assert numbers == set(range(1, max(numbers) + 1)), f"{key}: lines {sorted(numbers)} have a gap"
        # Briefs: exactly the valid ones on disk, with their current body; rejected ones as rejects.
        docs = dict(conn.execute("SELECT path, text FROM events WHERE line = 0").fetchall())
        assert docs == {p: body for p, (what, body) in self.briefs_scanned.items() if what == "event"}
        bad = {r[0] for r in conn.execute("SELECT path FROM rejects WHERE line = 0")}
        assert bad == {p for p, (what, _) in self.briefs_scanned.items() if what == "reject"}

    @invariant()
    def live_model_matches_store(self) -> None:
        """The daemon's model, fed by the store's marks and change feed across kills and restarts, scores exactly
        what a from-scratch evaluation of the store scores (briefs are rewritten and deleted here: their rowids are
        freed and reused, which rowid marks alone would miss).
        """
        self.feed.sync(self.store)
        at = self.clock.now
        live = self.feed.evaluate(at)
        ctx = Context(self.store.load_records(), at, self.feed.config)
        for name, result in live.items():
            assert to_json(result) == to_json(evaluate_window(ctx, name))

    @invariant()
    def index_matches_disk_after_a_scan(self) -> None:
        if not self.scanned:
            return
        self.scanned = False
        live = {p for p, row in self.store.index_rows().items() if row.deleted is None}
        assert live == {f.path for f in walk(self.root)}


def _diff(what: str, got: Counter[Any], want: Counter[Any]) -> str:
    extra, missing = got - want, want - got
    return f"{what}: stored but not expected {dict(list(extra.items())[:5])}; expected but missing " \
           f"{dict(list(missing.items())[:5])}"


IngestMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestIngestModel = IngestMachine.TestCase


class LinkMachine(IngestMachine):
    """The same machine with a symlink made and removed between passes (a machine of its own: the derandomized
    sequences of the one above stay as they were)."""

    @rule()
    def toggle_link(self) -> None:
        """``latest → briefs`` made or removed: a path through it names a brief's entry while it is there."""
        link = self.root / "latest"
        if link.is_symlink():
            link.unlink()
        else:
            link.symlink_to("briefs")

    @rule(log=st.sampled_from(LOGS), brief=st.sampled_from(BRIEFS))
    def cite_through_the_link(self, log: str, brief: str) -> None:
        """A decision citing a brief through the link."""
        self.append_lines(log, [("valid", True, "dm", f"see [source:latest/{brief.rpartition('/')[2]}]", False)])

    @rule(k=st.integers(1, 3))
    def kill_while_storing_the_links(self, k: int) -> None:
        """A fault at the k-th link written by a scan, then restart and scan: the links stored are the scan's or
        the last ones, never half of them."""
        self.kill_mid_scan_then_restart(k, "put_link")


LinkMachine.TestCase.settings = settings(IngestMachine.TestCase.settings, max_examples=300)
TestIngestModelWithLinks = LinkMachine.TestCase


# --- the documented limits, as fixed sequences: what the store holds, and that the model expects exactly that

LOG = LOGS[0]
VALID = ("valid", True, "dm", "v", False)  # line n gets the id e<n>
BLANK = ("bad", "blank")
Step = tuple[Any, ...]

#: name → (steps, the event ids stored, the number of rejects stored). docs/reliability.md, "What is not promised".
DOCUMENTED: dict[str, tuple[list[Step], set[str], int]] = {
    # Two rotations between passes: a truncation (or a copytruncate) starts a generation no pass has seen, and the
    # rename rotates it away; the cursor no longer recognises the file, so that generation's line 2 is never read.
    "copytruncate, append, rename": (
        [("append_lines", LOG, [VALID]), ("scan",), ("copytruncate", LOG), ("append_lines", LOG, [VALID]),
         ("rotate_rename", LOG), ("scan",)], {"e1"}, 0),
    "truncate, append, rename, new log": (
        [("append_lines", LOG, [VALID]), ("scan",), ("truncate", LOG), ("append_lines", LOG, [VALID]),
         ("rotate_rename", LOG), ("append_lines", LOG, [VALID]), ("scan",)], {"e1", "e3"}, 0),
    "truncate, half a line, rename, the line completed": (
        [("append_lines", LOG, [VALID]), ("scan",), ("truncate", LOG), ("append_partial", LOG, "zz", 0.5),
         ("rotate_rename", LOG), ("complete_partial_of", f"{LOG}.1"), ("scan",)], {"e1"}, 0),
    # A cursor that has read nothing recognises any file: the rotated one is drained, nothing is lost.
    "empty log seen, truncate, append, rename": (
        [("recreate", LOG), ("scan",), ("append_lines", LOG, [VALID]), ("truncate", LOG),
         ("append_lines", LOG, [VALID]), ("rotate_rename", LOG), ("scan",)], {"e2"}, 0),
    # Fingerprint collisions: rewritten with the same first bytes as those read (a blank line), it looks like an
    # append, and the rewritten blank line is not read again; also when the file was rotated meanwhile.
    "blank line, truncate, the same blank line and more": (
        [("append_lines", LOG, [BLANK]), ("scan",), ("truncate", LOG), ("append_lines", LOG, [BLANK, VALID]),
         ("scan",)], {"e3"}, 1),
    "blank line, truncate, the same and more, rename": (
        [("append_lines", LOG, [BLANK]), ("scan",), ("truncate", LOG), ("append_lines", LOG, [BLANK, VALID]),
         ("rotate_rename", LOG), ("scan",)], {"e3"}, 1),
    # No collision: a different first line is read again from 0, as a new generation.
    "valid line, truncate, two more": (
        [("append_lines", LOG, [VALID]), ("scan",), ("truncate", LOG), ("append_lines", LOG, [BLANK, VALID]),
         ("scan",)], {"e1", "e3"}, 1),
}


@pytest.mark.parametrize("name", DOCUMENTED)
def test_the_model_expects_the_documented_limits(name: str) -> None:
    steps, ids, rejects = DOCUMENTED[name]
    machine = IngestMachine()
    try:
        for method, *args in steps:
            getattr(machine, method)(*args)
            machine.store_matches_model()
            machine.live_model_matches_store()
            machine.index_matches_disk_after_a_scan()
        assert {i for i, _ in machine.events} == ids
        assert machine.rejects.total() == rejects
    finally:
        machine.teardown()


# --- the draws: a function of the machine's own strategies, whatever was imported before (tests/conftest.py)


def test_the_draws_do_not_depend_on_the_modules_imported_before(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis draws literals found in the project's modules loaded so far (any module outside site-packages,
    the stdlib and test files), so the modules earlier tests imported changed these sequences; conftest.py turns
    that off. A module of literals the machine's strategies could draw is imported between two runs."""

    def draws() -> list[Any]:
        seen: list[Any] = []

        @settings(max_examples=200, derandomize=True, database=None, deadline=None)
        @given(st.lists(st.tuples(TEXTS, st.integers(1, 6), st.sampled_from(MALFORMED), st.floats(0, 1)),
                        max_size=3))
        def collect(value: list[Any]) -> None:
            seen.append(value)

        collect()
        return seen

    first = draws()
    (tmp_path / "literals_loaded_later.py").write_text(
        "WORDS = ['see Issue #12', 'no data', 'x', 'ünï', 'abc', 'heartbeats']\n"
        "NUMBERS = [1, 2, 3, 4, 5, 6, 0.25, 0.5]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "literals_loaded_later", raising=False)
    importlib.import_module("literals_loaded_later")
    assert draws() == first
