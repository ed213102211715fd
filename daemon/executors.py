"""The daemon's worker threads: one pool per kind of work, and the call that runs a function on one of them.

Used by the running service (daemon/app/) and by the model's keeper (daemon/modelkeeper.py), which both hand blocking
work (SQLite, the scoring model) to a pool of its kind so that the event loop stays free for HTTP.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

#: Threads answering audits, histories and pages: pure Python under the GIL, so a second would answer no more of
#: them, only take the GIL from the loop more often and hold twice the objects the garbage collector walks.
REQUEST_THREADS = 1

P = ParamSpec("P")
T = TypeVar("T")


def _pool(threads: int, name: str) -> Callable[[], Executor]:
    return lambda: ThreadPoolExecutor(threads, thread_name_prefix=name)


@dataclass(frozen=True)
class Executors:
    """The daemon's worker threads, one pool per kind of work, so that no kind waits in another's queue.

    Sharing the loop's default pool, a crowd of audits queued ahead of every ingest pass and evaluation. ``ingest``
    is the store writer's (ingest passes, label writes, history and check writes, everything under the store lock;
    SQLite writes one at a time anyway); ``model`` the scoring model's (loads, syncs, evaluations, the model cache,
    changelog writes); ``requests`` HTTP request work (audits, histories, pages; their number is capped by
    ``[api] max_concurrent_audits``); ``poll`` the log poller's stats (collectors/poll.py: one per log every
    debounce, each a system call after which the loop would wait for the GIL again); ``metrics`` the render of a
    new snapshot's ``/metrics`` body (not behind an audit, nor an evaluation).
    """

    ingest: Executor = field(default_factory=_pool(1, "honestyd-ingest"))
    model: Executor = field(default_factory=_pool(1, "honestyd-model"))
    requests: Executor = field(default_factory=_pool(REQUEST_THREADS, "honestyd-http"))
    poll: Executor = field(default_factory=_pool(1, "honestyd-poll"))
    metrics: Executor = field(default_factory=_pool(1, "honestyd-metrics"))

    def shutdown(self) -> None:
        """The poll's and HTTP's pools first (HTTP is closed), then the model, then the store writer; work still
        queued is dropped, and what runs finishes on its own (it cannot be interrupted)."""
        for executor in (self.poll, self.metrics, self.requests, self.model, self.ingest):
            executor.shutdown(wait=False, cancel_futures=True)


async def run_in(executor: Executor, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on ``executor`` (asyncio.to_thread, on a pool of the caller's choosing)."""
    return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(fn, *args, **kwargs))
