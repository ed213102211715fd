"""The model cache written while running (daemon/cachewriter.py): a forked child writes the model as it was at the
fork, whatever the parent does meanwhile; a failure comes back as a reason; the change feed is kept for the cache on
disk and the one being written. The daemon-level round trip (SIGKILL, restart from the cache) is
tests/system/test_crash_restart.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import pytest

from daemon import cachewriter, forking, modelcache
from daemon.modelkeeper import LiveFeed, Marks, ModelKeeper
from tests.daemon.test_modelcache import CONFIG, World, _same_scores
from tests.daemon.test_modelcache import world as world  # the fixture

__all__ = ["world"]

#: Armed (not empty): a child forked now stops itself at once, a writer slower than any stop (see _writing_stopped).
_STOP_AT_FORK: list[bool] = []


def _stop_if_armed() -> None:
    if _STOP_AT_FORK:
        os.kill(os.getpid(), signal.SIGSTOP)


os.register_at_fork(after_in_child=_stop_if_armed)


def test_the_child_writes_the_model_as_it_was_at_the_fork(world: World) -> None:
    running = world.fed()
    writer = cachewriter.start(running, world.cache, world.store.store_id())
    at_fork = writer.marks
    world.change_everything()  # the parent's model moves on while the child writes
    world.fed(running)
    assert running.marks != at_fork
    size, why = cachewriter.wait(writer)
    assert why == "" and size == world.cache.stat().st_size
    loaded = modelcache.load(world.cache, CONFIG, world.store)
    assert loaded is not None and loaded.marks == at_fork
    world.fed(loaded)  # caught up from the fork's marks
    _same_scores(loaded, world.fed(), world.now + timedelta(hours=1))


def test_a_write_that_fails_comes_back_as_its_reason(world: World, tmp_path: Path) -> None:
    running = world.fed()
    writer = cachewriter.start(running, tmp_path / "no such folder" / "x.model", world.store.store_id())
    size, why = cachewriter.wait(writer)
    assert size is None and why.startswith("FileNotFoundError")


def test_the_writer_closes_every_descriptor_it_inherited(tmp_path: Path) -> None:
    """The port and the store's lock must die with the daemon, not live on in its writer: in a forked child,
    close_inherited leaves only what it was told to keep (five files this process holds open among those closed)."""
    held = [os.open(tmp_path / f"held-{i}", os.O_CREAT | os.O_WRONLY) for i in range(5)]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        forking.close_inherited(keep={0, 1, 2, write_end})
        os.write(write_end, " ".join(sorted(os.listdir("/proc/self/fd"))).encode())
        os._exit(0)
    os.close(write_end)
    try:
        left = os.read(read_end, 4096).decode().split()
        assert os.waitpid(pid, 0)[1] == 0
    finally:
        os.close(read_end)
        for fd in held:
            os.close(fd)
    # What is left: the kept ones and the descriptor listdir itself had open.
    assert len({int(fd) for fd in left} - {0, 1, 2, write_end}) <= 1, left


def test_the_change_feed_is_kept_for_the_cache_on_disk_and_the_one_being_written(world: World) -> None:
    writes = cachewriter.CacheWrites()
    assert writes.prunable(40) == 40  # no cache of this run: the model's marks
    keeper = ModelKeeper(ThreadPoolExecutor(1))
    keeper.feed = world.fed()
    reader = world.store
    config = replace(CONFIG, db_path=world.tmp / "honestyd.db")
    assert asyncio.run(writes.write(keeper, config, reader))
    written = keeper.feed.marks[3]
    assert writes.written == written and writes.last is not None
    assert writes.prunable(written + 10) == written  # the cache on disk still catches up
    loaded = modelcache.load(world.cache, CONFIG, world.store)
    assert loaded is not None and loaded.marks == keeper.feed.marks
    keeper.executor.shutdown()


def test_a_cache_that_holds_the_model_as_it_is_is_not_written_again(world: World) -> None:
    writes = cachewriter.CacheWrites()
    keeper = ModelKeeper(ThreadPoolExecutor(1))
    feed = keeper.feed = world.fed()
    config = replace(CONFIG, db_path=world.tmp / "honestyd.db")
    assert not writes.holds(feed, world.cache)  # nothing written by this run yet
    assert asyncio.run(writes.write(keeper, config, world.store))
    identity = world.cache.stat().st_ino, world.cache.stat().st_mtime_ns
    world.fed(feed)  # evaluated again, nothing new applied
    assert writes.holds(feed, world.cache)
    assert not asyncio.run(writes.write(keeper, config, world.store))
    assert (world.cache.stat().st_ino, world.cache.stat().st_mtime_ns) == identity
    assert writes.behind(feed, world.cache) == 0
    before = feed.marks
    world.change_everything()
    world.fed(feed)  # records applied: the marks moved
    assert not writes.holds(feed, world.cache)
    assert writes.behind(feed, world.cache) == sum(feed.marks) - sum(before) > 0
    assert asyncio.run(writes.write(keeper, config, world.store))
    assert writes.holds(feed, world.cache)
    reweighted = replace(CONFIG, scoring=replace(CONFIG.scoring, min_decisions=CONFIG.scoring.min_decisions + 1))
    assert feed.adopt(reweighted)  # outcomes stay right, but a cache of the old config would be refused
    assert not writes.holds(feed, world.cache)
    assert writes.behind(feed, world.cache) is None
    feed.adopt(CONFIG)
    assert writes.holds(feed, world.cache)
    world.cache.write_bytes(world.cache.read_bytes())  # another file in its place
    assert not writes.holds(feed, world.cache)
    assert writes.behind(feed, world.cache) is None
    assert not writes.holds(world.fed(), world.cache)  # another model
    assert writes.behind(world.fed(), world.cache) is None
    keeper.executor.shutdown()


@dataclass
class _Stopped:
    """A cache written, the model moved on, and a second write whose child stopped itself as it was forked."""

    writes: cachewriter.CacheWrites
    keeper: ModelKeeper
    feed: LiveFeed
    #: The first cache's file identity and the marks it was written at.
    earlier: tuple[int, int]
    before: Marks
    task: asyncio.Future[bool]
    pid: int


async def _writing_stopped(world: World) -> _Stopped:
    """See :class:`_Stopped` (shut its keeper's executor down after)."""
    writes = cachewriter.CacheWrites()
    keeper = ModelKeeper(ThreadPoolExecutor(1))
    feed = keeper.feed = world.fed()
    config = replace(CONFIG, db_path=world.tmp / "honestyd.db")
    assert await writes.write(keeper, config, world.store)
    earlier, before = _identity(world.cache), feed.marks
    world.change_everything()
    world.fed(feed)
    _STOP_AT_FORK.append(True)
    try:
        task = asyncio.ensure_future(writes.write(keeper, config, world.store))
        for _ in range(1000):
            if writes.writer is not None and _stopped(writes.writer.pid):
                # Stopped, not only forked: a SIGCONT sent before its own SIGSTOP would be lost, and it would wait.
                return _Stopped(writes, keeper, feed, earlier, before, task, writes.writer.pid)
            await asyncio.sleep(0.01)
    finally:
        _STOP_AT_FORK.clear()
    raise AssertionError("no writer forked and stopped")


def _stopped(pid: int) -> bool:
    """True once the process is stopped by a signal (its state in /proc is T)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


def _identity(path: Path) -> tuple[int, int]:
    return path.stat().st_ino, path.stat().st_mtime_ns


def test_a_stop_ends_a_write_still_under_way_once_its_bound_has_passed(world: World) -> None:
    """settle's bound: a writer that does not finish is ended, the cache on disk stays the earlier one (the stop
    then does what it does without a writer: keeps it when few rows behind, or writes the cache itself)."""

    async def run() -> ModelKeeper:
        w = await _writing_stopped(world)
        try:
            assert not await w.writes.settle(0.05)
            assert not await w.task
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(w.pid, signal.SIGKILL)
        assert w.writes.writer is None and not Path(f"/proc/{w.pid}").exists()  # ended and reaped
        assert _identity(world.cache) == w.earlier
        assert w.writes.behind(w.feed, world.cache) == sum(w.feed.marks) - sum(w.before) > 0
        return w.keeper

    asyncio.run(run()).executor.shutdown()


@pytest.mark.parametrize(("sig", "wrote"), [(signal.SIGCONT, True), (signal.SIGKILL, False)],
                         ids=["finishes", "dies"])
def test_a_stop_waits_for_a_write_under_way(world: World, sig: signal.Signals, wrote: bool) -> None:
    """settle waits for the writer: one that finishes leaves its cache (nothing behind the model it forked), one
    that dies leaves the earlier cache, and settle says which."""

    async def run() -> ModelKeeper:
        w = await _writing_stopped(world)
        settling = asyncio.ensure_future(w.writes.settle(60))
        await asyncio.sleep(0)  # settle is waiting for the writer now
        os.kill(w.pid, sig)
        assert await settling is wrote
        assert await w.task is wrote
        assert (_identity(world.cache) != w.earlier) is wrote
        assert (w.writes.behind(w.feed, world.cache) == 0) is wrote
        return w.keeper

    asyncio.run(run()).executor.shutdown()
