"""cProfile across every thread, and the top-30 report that ``--profile PART`` writes.

The daemon evaluates in ``asyncio.to_thread`` workers, and plain cProfile sees only the thread
that enabled it: the expensive part would be missing from the profile. :class:`AllThreads`
gives every thread started while it is active its own profiler and merges them at the end.

``python -m bench.profiling OUT.prof ARG ...`` runs ``honestyd ARG ...`` (daemon.cli) that way
and dumps the merged stats to OUT.prof when the command returns (the daemon returns on SIGTERM).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

TOP = 30


class AllThreads:
    """Profile the current thread and every thread started while this is active."""

    def __init__(self) -> None:
        self._main = cProfile.Profile()
        self._others: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _start_in_thread(self, frame: FrameType, event: str, arg: Any) -> None:
        # Called once, as the new thread's first profile event: hand the thread over to its own profiler
        # (enable() replaces this hook for the thread).
        profiler = cProfile.Profile()
        with self._lock:
            self._others.append(profiler)
        profiler.enable()

    def __enter__(self) -> AllThreads:
        threading.setprofile(self._start_in_thread)
        self._main.enable()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._main.disable()
        threading.setprofile(None)  # None removes the hook for threads started from now on

    def stats(self) -> pstats.Stats:
        """The merged statistics (threads still running contribute what they have so far)."""
        stats = pstats.Stats(self._main)
        with self._lock:
            others = list(self._others)
        for profiler in others:
            try:
                stats.add(profiler)
            except TypeError:  # a thread that recorded nothing has no stats to add
                continue
        return stats

    def dump(self, path: Path) -> None:
        self.stats().dump_stats(str(path))


def top(prof_files: list[tuple[str, Path]], limit: int = TOP) -> str:
    """The top ``limit`` functions by cumulative time of each (title, .prof file), as text."""
    out = io.StringIO()
    for title, path in prof_files:
        out.write(f"=== {title} ===\n")
        if not path.exists():
            out.write("(no profile written)\n\n")
            continue
        stats = pstats.Stats(str(path), stream=out)
        stats.strip_dirs().sort_stats("cumulative").print_stats(limit)
        out.write("\n")
    return out.getvalue()


def main(argv: list[str]) -> int:
    """Run daemon.cli with ``argv[1:]`` under :class:`AllThreads`; dump to ``argv[0]``."""
    from daemon.cli import main as honestyd

    out, args = Path(argv[0]), argv[1:]
    profiler = AllThreads()
    code = 1
    try:
        with profiler:
            code = honestyd(args)
    finally:
        profiler.dump(out)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
