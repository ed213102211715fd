"""One malloc arena for the whole daemon (glibc).

glibc gives each thread that allocates while another holds the main arena an arena of its own, up to eight per core,
and memory freed in an arena stays with it. The daemon's threads (the model's worker, the watcher, the cache's reader,
the executors) each allocate in bursts, so each arena keeps a burst's worth of freed pages resident. The GIL runs one
thread's Python at a time and CPython's small objects never reach malloc, so a single arena costs no parallelism
that the daemon has; the peak it saves is in docs/performance.md. ``MALLOC_ARENA_MAX`` in the environment wins
(glibc read it at start: this leaves it alone).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

#: mallopt's parameter for the most arenas (malloc.h).
M_ARENA_MAX = -8


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None on another C library (musl has none) or without ctypes' libc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


def one_arena(environ: dict[str, str] | None = None,
              mallopt: Callable[[], Callable[[int, int], int] | None] = _glibc_mallopt) -> bool:
    """Ask malloc for one arena before any thread starts; True when it took the setting (False: another C library,
    or ``MALLOC_ARENA_MAX`` set in ``environ``, the process's by default)."""
    if "MALLOC_ARENA_MAX" in (os.environ if environ is None else environ):
        return False
    call = mallopt()
    return call is not None and call(M_ARENA_MAX, 1) == 1
