"""The daemon's malloc settings (glibc): one arena, and a fixed threshold for blocks given pages of their own.

glibc gives each thread that allocates while another holds the main arena an arena of its own, up to eight per core,
and memory freed in an arena stays with it. The daemon's threads (the model's worker, the watcher, the cache's reader,
the executors) each allocate in bursts, so each arena keeps a burst's worth of freed pages resident. The GIL runs one
thread's Python at a time and CPython's small objects never reach malloc, so a single arena costs no parallelism
that the daemon has.

glibc also raises its mmap threshold (from 128 KiB, up to 32 MiB) each time a block that had pages of its own is
freed: from then on blocks that size come from the heap, where a block freed below one still held is never given
back. A start frees such blocks early (the catch-up scan's lists and sets) while the model's columns grow beside
them, so the heap kept the freed space at its peak. A fixed threshold keeps big blocks in pages of their own (given
back when freed, grown by ``mremap``). The peak each saves is in docs/performance.md. A setting in the environment
(``MALLOC_ARENA_MAX``, ``MALLOC_MMAP_THRESHOLD_``) wins: glibc read it at start, and it is left alone.

Blocks under the threshold freed below ones still held stay resident: :func:`trim` gives their pages back, for the
daemon to call after a burst of them (the first ``/metrics`` render, which follows the model's first evaluation).
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, Mapping

#: mallopt's parameters (malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: Blocks from this size on get pages of their own: glibc's starting threshold, kept.
MMAP_THRESHOLD = 128 * 1024
#: (parameter, value, the environment variable that overrides it).
SETTINGS = ((M_ARENA_MAX, 1, "MALLOC_ARENA_MAX"), (M_MMAP_THRESHOLD, MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_"))


@functools.cache
def _glibc(function: str, argtypes: tuple[type[ctypes._SimpleCData[int]], ...]) -> Callable[..., int] | None:
    """glibc's ``function`` (returning an int) from the symbols the process has loaded, or None on another C library
    (musl has no ``malloc_trim``) or without ctypes. Looked up once: ``ctypes.util.find_library`` would run
    ``ldconfig`` in a child process at every call."""
    try:
        found = getattr(ctypes.CDLL(None), function)
    except (OSError, AttributeError):
        return None
    found.argtypes, found.restype = argtypes, ctypes.c_int
    return found  # type: ignore[no-any-return]


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None (see :func:`_glibc`)."""
    return _glibc("mallopt", (ctypes.c_int, ctypes.c_int))


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (see :func:`_glibc`)."""
    return _glibc("malloc_trim", (ctypes.c_size_t,))


def trim(malloc_trim: Callable[[], Callable[[int], int] | None] = _glibc_malloc_trim) -> bool:
    """Give the pages of the heap's free blocks back to the system (glibc's ``malloc_trim(0)``, which also releases
    free pages below blocks still held); True when some were. Takes the arena's lock for a walk of its free blocks:
    call it after a burst, not per request."""
    call = malloc_trim()
    return call is not None and call(0) == 1


def settle(environ: Mapping[str, str] | None = None,
           mallopt: Callable[[], Callable[[int, int], int] | None] = _glibc_mallopt) -> dict[str, bool]:
    """Apply :data:`SETTINGS` before any thread starts; per environment variable, True when malloc took the setting
    (False: another C library, or the variable set in ``environ``, the process's by default)."""
    chosen = os.environ if environ is None else environ
    call = mallopt()
    return {name: call is not None and name not in chosen and call(param, value) == 1
            for param, value, name in SETTINGS}
