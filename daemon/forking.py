"""What a child forked from the daemon does first: die with the thread that forked it, and let go of the parent's
descriptors (the port, the store's lock and files stay the parent's alone). Used by the model cache's writer
(daemon/cachewriter.py) and a cold start's second core (daemon/coldsplit.py)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

#: prctl(2)'s option that signals the child when the thread that forked it ends.
_PR_SET_PDEATHSIG = 1
#: libc's prctl, resolved at import (a dlopen in the child could wait for a loader lock another thread held).
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def become_child(parent: int, keep: set[int]) -> None:
    """In a child just forked from ``parent``: be killed when the forking thread ends, exit at once if the parent is
    gone already, and close every descriptor but ``keep``."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above: no one waits for this child
        os._exit(1)
    close_inherited(keep)


def close_inherited(keep: set[int]) -> None:
    """Close every descriptor but ``keep``: the listening sockets and the store lock must die with the parent."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):  # the descriptor listdir itself had open
                os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (a pipe takes a large write in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
