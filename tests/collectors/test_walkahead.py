"""collectors/walkahead.py: a start's walk of the state root in another process finds what the scan's own walk finds,
a scan given it stores what a scan walking itself stores, and a child that fails, is garbled or walked another root
leaves the scan to walk the root itself.

Real child interpreters over real pipes, a real state root (simulated, with a symlink and a dot file), real stores.
"""

from __future__ import annotations

import errno
import marshal
import os
import subprocess
import sys
import time
from pathlib import Path

from collectors import walkahead
from collectors.statedir import walk_tree
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.simulate import simulate
from daemon.store import Store

#: A child that answers with no files and one error, as a walk that met a folder it may not list.
_ONE_ERROR = ("import marshal, struct, sys;"
              " d = marshal.dumps(([], [[]] * 5, {}, [('briefs', 13, 'Permission denied')]));"
              " sys.stdout.buffer.write(struct.pack('<Q', len(d)) + d)")


def _root(tmp: Path) -> Path:
    root = tmp / "state"
    simulate(7, root, agents=2, days=1)
    (root / "briefs" / "alias.md").symlink_to(next(p.name for p in sorted((root / "briefs").glob("*.md"))))
    (root / ".hidden").write_text("never walked\n")
    return root


def _db(tmp: Path, size: int = 1) -> Path:
    db = tmp / "size.db"
    db.write_bytes(b"\0" * size)
    return db


def _cache(tmp: Path) -> Path:
    cache = tmp / "size.db.model"
    cache.write_bytes(b"")
    return cache


def _started(root: Path, tmp: Path, **kwargs: object) -> walkahead.WalkAhead:
    walk = walkahead.start(root, _db(tmp), cache=_cache(tmp), walk_from=0, cores=2, **kwargs)  # type: ignore[arg-type]
    assert walk is not None
    return walk


def test_the_childs_walk_is_the_scans_walk(tmp_path: Path) -> None:
    root = _root(tmp_path)
    before = time.time_ns()
    walk = _started(root, tmp_path)
    walked = walk.take(root)
    walk.close()
    assert walked is not None
    mine = walk_tree(root)
    assert walked.tree == mine
    assert len(mine.files) > 10 and mine.links  # the simulated files, and the symlink
    assert before <= walked.at_ns <= time.time_ns() and walked.errors == []


def test_the_walks_errors_are_handed_on_as_the_scans_own_walk_would(tmp_path: Path) -> None:
    root = _root(tmp_path)
    walk = _started(root, tmp_path, command=(sys.executable, "-c", _ONE_ERROR))
    walked = walk.take(root)
    walk.close()
    assert walked is not None and walked.tree.files == []
    seen: list[tuple[str, OSError]] = []
    walked.replay(lambda rel, exc: seen.append((rel, exc)))
    [(rel, exc)] = seen
    assert rel == "briefs" and isinstance(exc, PermissionError) and exc.errno == errno.EACCES


def test_a_child_that_fails_or_is_garbled_or_walked_elsewhere_leaves_the_walk_to_the_scan(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert _started(root, tmp_path, command=(sys.executable, "-c", "import sys; sys.exit(3)")).take(root) is None
    garbled = (sys.executable, "-c", "import sys; sys.stdout.write('not marshal')")
    assert _started(root, tmp_path, command=garbled).take(root) is None
    asleep = _started(root, tmp_path, command=(sys.executable, "-c", "import time; time.sleep(60)"))
    assert asleep.take(root, timeout=0.2) is None
    asleep.process.wait(10)  # killed by take: a late child does not walk on
    other = _started(root, tmp_path)
    assert other.take(tmp_path / "elsewhere") is None


def test_a_small_store_one_core_or_no_model_cache_walks_in_the_daemon(tmp_path: Path) -> None:
    root, cache = _root(tmp_path), _cache(tmp_path)
    assert walkahead.start(root, _db(tmp_path, 100), cache=cache, walk_from=101, cores=2) is None
    assert walkahead.start(root, _db(tmp_path, 100), cache=cache, walk_from=0, cores=1) is None
    # A first start (no store yet), and a start that builds its model (no cache, or none wanted).
    assert walkahead.start(root, tmp_path / "none.db", cache=cache, walk_from=0, cores=2) is None
    assert walkahead.start(root, _db(tmp_path, 100), cache=tmp_path / "none.model", walk_from=0, cores=2) is None
    assert walkahead.start(root, _db(tmp_path, 100), cache=None, walk_from=0, cores=2) is None
    walk = walkahead.start(root, _db(tmp_path, 100), cache=cache, walk_from=100, cores=2)
    assert walk is not None and walk.take(root) is not None
    walk.close()


def test_what_changed_between_two_walks_is_every_path_added_gone_or_stated_otherwise(tmp_path: Path) -> None:
    root = _root(tmp_path)
    before = walk_tree(root)
    assert walkahead.changed(before, walk_tree(root)) == []
    briefs = sorted(p for p in (root / "briefs").glob("*.md") if not p.is_symlink())
    briefs[0].write_text(briefs[0].read_text() + "\nEdited.\n")  # stat'ed otherwise
    briefs[1].unlink()  # gone
    (root / "findings" / "new.md").write_text("---\nagent: ada\n---\n\nNew.\n")  # added
    log = sorted((root / "heartbeats").glob("*.jsonl"))[0]
    copy = log.with_name(".copy")
    copy.write_bytes(log.read_bytes())
    os.utime(copy, ns=(log.stat().st_atime_ns, log.stat().st_mtime_ns))
    os.replace(copy, log)  # the same bytes and times under another inode
    rel = lambda p: str(p.relative_to(root))  # noqa: E731
    assert walkahead.changed(before, walk_tree(root)) == sorted(
        [rel(briefs[0]), rel(briefs[1]), "findings/new.md", rel(log)])
    (root / "briefs" / "alias.md").unlink()  # a symlink gone: what names lead to changed
    assert walkahead.changed(before, walk_tree(root)) is None


def _scanned(root: Path, db: Path, walked: walkahead.Walked | None) -> Store:
    store = Store.open(db)
    Ingester(store, root, Config(state_root=root, db_path=db)).scan(walked=walked)
    return store


def test_a_scan_given_the_childs_walk_stores_what_a_scan_walking_itself_stores(tmp_path: Path) -> None:
    root = _root(tmp_path)
    walk = _started(root, tmp_path)
    walked = walk.take(root)
    walk.close()
    assert walked is not None
    with _scanned(root, tmp_path / "own.db", None) as own, _scanned(root, tmp_path / "ahead.db", walked) as ahead:
        query = "SELECT id, path, line FROM events ORDER BY id"
        events = own.conn.execute(query).fetchall()
        assert len(events) > 10 and ahead.conn.execute(query).fetchall() == events
        assert ahead.cursors() == own.cursors()
        own_rows, ahead_rows = list(own.stats_in_order()), list(ahead.stats_in_order())
        assert [r[:-1] for r in ahead_rows] == [r[:-1] for r in own_rows]
        # Its files were seen as of the walk's start, before the child stat'ed them: never later than the truth.
        assert {r[-1] for r in ahead_rows if r[-1] is not None} == {walked.at_ns}


def test_the_child_runs_as_a_module_of_its_own(tmp_path: Path) -> None:
    root = _root(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(walkahead.__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-m", "collectors.walkahead"], capture_output=True, env=env, timeout=60)
    assert done.returncode == 2 and b"usage" in done.stderr
    done = subprocess.run([sys.executable, "-m", "collectors.walkahead", str(root)], capture_output=True, env=env,
                          timeout=60, check=True, stdin=subprocess.DEVNULL)  # no second question: one answer
    size = int.from_bytes(done.stdout[:8], "little")
    assert len(done.stdout) == 8 + size
    assert marshal.loads(done.stdout[8:]) == marshal.loads(walkahead.answer(root)[0])


def test_asked_again_the_child_says_what_changed_since_its_walk(tmp_path: Path) -> None:
    root = _root(tmp_path)
    walk = _started(root, tmp_path)
    walked = walk.take(root)
    assert walked is not None
    brief = sorted(p for p in (root / "briefs").glob("*.md") if not p.is_symlink())[0]
    brief.write_text(brief.read_text() + "\nEdited after the walk.\n")
    (root / "findings" / "after.md").write_text("---\nagent: ada\n---\n\nWritten after the walk.\n")
    expected = walkahead.changed(walked.tree, walk_tree(root))
    assert expected == sorted([str(brief.relative_to(root)), "findings/after.md"])
    assert walk.changed_since() == expected
    assert walk.process.returncode is not None  # it has exited: asked once, then done


def test_a_child_that_cannot_answer_again_says_read_it_all(tmp_path: Path) -> None:
    root = _root(tmp_path)
    assert _started(root, tmp_path, command=(sys.executable, "-c", _ONE_ERROR)).changed_since() is None  # not taken
    once = _started(root, tmp_path, command=(sys.executable, "-c", _ONE_ERROR))
    assert once.take(root) is not None and once.changed_since() is None  # exited after its first answer
    hangs = _started(root, tmp_path, command=(sys.executable, "-c", _ONE_ERROR + "; import time; time.sleep(60)"))
    assert hangs.take(root) is not None and hangs.changed_since(timeout=0.5) is None  # killed past its time
