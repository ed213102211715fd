"""Simulated data sets and the stores ingested from them, cached under ``bench/.data/``.

Layout of one data set (keyed by the simulate arguments, so reruns skip generation)::

    sim-s1-a50-d30-e700/
        state/          what ``honestyd simulate`` wrote; never modified afterwards
        meta.json       counts and the simulated end time; written last, so its presence means "complete"
        work/           hard links to state/, except the live heartbeat file, which is a real copy
        hb/             hard links to state/heartbeats/ only (the ingest part's input)
        store-HASH.db   work/ ingested by the current ingest code (HASH covers daemon/ and collectors/)

Measurements that append (one new event, the daemon's latency) append only to work/'s live file,
a copy, so state/ stays pristine; afterwards the file is cut back to its recorded size and mtime,
which keeps the cached store's cursor valid. A store is only valid for the code that wrote it, so
its name carries a hash of the ingest code; a changed ingest means one fresh ingest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import REPO_ROOT
from bench.core import Settings, log, run, safety_timeout
from daemon.ingest.fingerprint import RACY_NS

#: The simulator's default start (daemon.simulate.DEFAULT_START); every data set uses it.
SIM_START = datetime.fromisoformat("2026-05-01T00:00:00+00:00")
#: Files the daemon may create inside a state root it runs on (its changelog, API labels, the reviews it opens: left
#: behind, the reviews file made every later start on the data set one that opens none).
_DAEMON_WRITES = ("iris/honesty-changelog.md", "labels/api.jsonl", "reviews/honestyd.jsonl")


@dataclass(frozen=True)
class SimArgs:
    """``honestyd simulate`` arguments; also the cache key."""

    agents: int
    days: int
    events_per_day: int
    seed: int = 1

    @property
    def key(self) -> str:
        return f"sim-s{self.seed}-a{self.agents}-d{self.days}-e{self.events_per_day}"

    def argv(self, out: Path) -> list[str]:
        return ["simulate", "--seed", str(self.seed), "--out", str(out), "--agents", str(self.agents),
                "--days", str(self.days), "--events-per-day", str(self.events_per_day)]


@functools.cache
def code_hash() -> str:
    """A short hash of the code that decides what a store holds (daemon/ and collectors/ sources).

    Taken once per run: code edited while a run is going must not make it ingest a second store.
    """
    digest = hashlib.sha256()
    for folder in ("daemon", "collectors"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            digest.update(str(path.relative_to(REPO_ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _count_lines(path: Path) -> int:
    count = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            count += chunk.count(b"\n")
    return count


def _hardlink_tree(src: Path, dst: Path, skip: set[str]) -> None:
    for dirpath, _dirs, files in os.walk(src):
        rel_dir = Path(dirpath).relative_to(src)
        (dst / rel_dir).mkdir(parents=True, exist_ok=True)
        for name in files:
            rel = (rel_dir / name).as_posix()
            if rel in skip:
                shutil.copy2(Path(dirpath) / name, dst / rel)  # a real copy: it is the one appended to
            else:
                os.link(Path(dirpath) / name, dst / rel)


class Dataset:
    """One cached simulated state and what is derived from it."""

    def __init__(self, args: SimArgs, settings: Settings) -> None:
        self.args = args
        self.settings = settings
        self.dir = settings.data_dir / args.key
        self.state = self.dir / "state"
        self.work = self.dir / "work"
        self.hb = self.dir / "hb"
        self._meta: dict[str, Any] | None = None

    # --- generation

    def ensure(self) -> Dataset:
        """Simulate (once), then make sure work/ and hb/ exist and work/ is pristine."""
        meta_path = self.dir / "meta.json"
        if not meta_path.exists():
            self._simulate()
        self._meta = json.loads(meta_path.read_text())
        if "live_size" not in self.meta or not (self.work / self.live_rel).exists():
            self._make_views()
        self.restore()
        return self

    def _simulate(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        log(f"simulating {self.args.key} (cached for later runs)")
        seconds, out = run([self.settings.python, "-m", "daemon.cli", *self.args.argv(self.state)],
                           timeout=safety_timeout(self.settings))
        beats = sorted((self.state / "heartbeats").glob("*.jsonl"))
        # The live file: the first agent's log that is not the CI bot's (a decision-making agent).
        live = next(p for p in beats if p.name != "ci.jsonl")
        meta = {
            "args": self.args.__dict__,
            "simulate_output": out.strip(),
            "simulate_seconds": round(seconds, 2),
            "end": (SIM_START + timedelta(days=self.args.days)).isoformat().replace("+00:00", "Z"),
            "heartbeat_files": len(beats),
            "heartbeat_events": sum(_count_lines(p) for p in beats),
            "label_lines": sum(_count_lines(p) for p in (self.state / "labels").glob("*.jsonl")),
            "live_rel": f"heartbeats/{live.name}",
            "live_agent": json.loads(live.open("rb").readline())["agent"],
        }
        (self.dir / "meta.json").write_text(json.dumps(meta, indent=2))

    def _make_views(self) -> None:
        for view in (self.work, self.hb):
            shutil.rmtree(view, ignore_errors=True)
        for old in self.dir.glob("store-*.db*"):
            old.unlink()  # a store's cursors name work/'s inodes: a new work/ invalidates every store
        # Real copies of whatever gets written to, so writes never reach state/ through a shared inode.
        _hardlink_tree(self.state, self.work, skip={self.live_rel, *_DAEMON_WRITES})
        (self.hb / "heartbeats").mkdir(parents=True)
        for beat in sorted((self.state / "heartbeats").glob("*.jsonl")):
            os.link(beat, self.hb / "heartbeats" / beat.name)
        # Recorded last: its presence in meta.json says both views are complete.
        st = (self.work / self.live_rel).stat()
        meta = dict(self.meta, live_size=st.st_size, live_mtime_ns=st.st_mtime_ns)
        (self.dir / "meta.json").write_text(json.dumps(meta, indent=2))
        self._meta = meta

    def restore(self) -> None:
        """Undo what a measurement did to work/: cut the live file back, drop files the daemon created."""
        live = self.work / self.live_rel
        size, mtime_ns = self.meta["live_size"], self.meta["live_mtime_ns"]
        st = live.stat()
        if st.st_size < size:
            raise RuntimeError(f"{live} is shorter than recorded; delete {self.dir} to rebuild it")
        if st.st_size != size:
            os.truncate(live, size)
        if st.st_size != size or st.st_mtime_ns != mtime_ns:
            os.utime(live, ns=(mtime_ns, mtime_ns))
        for rel in _DAEMON_WRITES:
            if (self.state / rel).exists():
                shutil.copy2(self.state / rel, self.work / rel)
                continue
            (self.work / rel).unlink(missing_ok=True)
            folder = (self.work / rel).parent
            if not (self.state / rel).parent.exists() and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()  # the folder the daemon made for it

    # --- facts

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            raise RuntimeError("call ensure() first")
        return self._meta

    @property
    def events(self) -> int:
        """Heartbeat events (lines of heartbeats/*.jsonl)."""
        return int(self.meta["heartbeat_events"])

    @property
    def end(self) -> str:
        """The simulated end time (RFC 3339): the evaluation time of every rescore."""
        return str(self.meta["end"])

    @property
    def live_rel(self) -> str:
        return str(self.meta["live_rel"])

    @property
    def live_agent(self) -> str:
        return str(self.meta["live_agent"])

    @property
    def config(self) -> Path:
        """The simulator's config (it names the GitHub repository the citations refer to)."""
        return self.state / ".sim" / "config.toml"

    def heartbeat_files(self, root: Path | None = None) -> list[Path]:
        return sorted(((root or self.hb) / "heartbeats").glob("*.jsonl"))

    # --- stores

    def store_path(self) -> Path:
        return self.dir / f"store-{code_hash()}.db"

    def ingest_cmd(self, db: Path, state: Path | None = None) -> list[str]:
        """``honestyd ingest`` (as ``python -m daemon.cli``, so the venv's interpreter is the one timed)."""
        return [self.settings.python, "-m", "daemon.cli", "ingest", "--state", str(state or self.work),
                "--db", str(db), "--config", str(self.config)]

    def adopt(self, db: Path) -> bool:
        """Keep a freshly ingested ``db`` of work/ as the cached store if there is none yet."""
        target = self.store_path()
        if target.exists():
            return False
        for old in self.dir.glob("store-*.db*"):
            old.unlink()  # an older code version's store: never valid again
        for suffix in ("-wal", "-shm"):
            side = Path(f"{db}{suffix}")
            if side.exists():
                side.rename(f"{target}{suffix}")
        db.rename(target)
        return True

    def store(self) -> Path:
        """The cached store of work/ for the current code, ingesting it (untimed) if missing."""
        target = self.store_path()
        if not target.exists():
            tmp = self.dir / "ingest-tmp.db"
            for side in self.dir.glob("ingest-tmp.db*"):
                side.unlink()
            log(f"ingesting {self.args.key} into a store for this code version (untimed preparation)")
            self.restore()
            settle(self.work)
            run(self.ingest_cmd(tmp), timeout=safety_timeout(self.settings))
            self.adopt(tmp)
        return target

    def copy_store(self, dest: Path) -> Path:
        """A private copy of the cached store, for measurements that write to it."""
        src = self.store()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{dest}{suffix}").unlink(missing_ok=True)
            if Path(f"{src}{suffix}").exists():
                shutil.copyfile(f"{src}{suffix}", f"{dest}{suffix}")
        return dest


def settle(root: Path, clock: Callable[[], int] = time.time_ns, sleep: Callable[[float], None] = time.sleep) -> float:
    """Wait until every file under ``root`` last changed more than the ingest's racy window ago (RACY_NS), and
    return the seconds waited. A store ingested from files written a moment before holds their fingerprints as
    racy, so each daemon started on a copy of it reads every document again (55k of them, ~20 s at the scale
    part's size) to trust them, and the copy that learns it is thrown away: a state root whose files a host
    wrote seconds before its first scan is not what a restart meets."""
    newest = max((entry.stat(follow_symlinks=False).st_ctime_ns for entry in _files(root)), default=0)
    wait = (newest + RACY_NS - clock()) / 1e9
    if wait > 0:
        sleep(wait + 0.05)
    return max(wait, 0.0)


def _files(root: Path) -> Iterator[os.DirEntry[str]]:
    for entry in os.scandir(root):
        if entry.is_dir(follow_symlinks=False):
            yield from _files(Path(entry.path))
        else:
            yield entry


def remove_db(db: Path) -> None:
    """Delete a scratch database with its WAL side files and its model cache (a later daemon on a new copy would
    read it and refuse it)."""
    for suffix in ("", "-wal", "-shm", "-journal", ".model"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def probe_line(agent: str, n: int, ts: str) -> bytes:
    """One valid heartbeat decision for ``agent`` (unique id), as an appended JSON line."""
    event = {
        "id": f"{agent}-bench-{n}", "ts": ts, "agent": agent, "kind": "dm", "thread": "bench-probe",
        "text": f"Probe {n}: the nightly run is green. See [runbook](docs/runbook.md).", "citations": ["Issue #1"],
    }
    return (json.dumps(event, separators=(",", ":")) + "\n").encode()
