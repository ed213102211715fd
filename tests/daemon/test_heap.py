"""daemon/heap.py: the daemon asks glibc for one malloc arena and a fixed mmap threshold, unless the environment
already chose."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from daemon import heap


def _recording(calls: list[tuple[int, int]], result: int = 1) -> Callable[[], Callable[[int, int], int]]:
    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return result

    return lambda: mallopt


def test_both_settings_are_asked_of_malloc() -> None:
    calls: list[tuple[int, int]] = []
    assert heap.settle({}, _recording(calls)) == {"MALLOC_ARENA_MAX": True, "MALLOC_MMAP_THRESHOLD_": True}
    assert calls == [(heap.M_ARENA_MAX, 1), (heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD)]


def test_the_environment_s_choice_is_left_alone() -> None:
    calls: list[tuple[int, int]] = []
    assert heap.settle({"MALLOC_ARENA_MAX": "4"}, _recording(calls)) == {"MALLOC_ARENA_MAX": False,
                                                                         "MALLOC_MMAP_THRESHOLD_": True}
    assert calls == [(heap.M_MMAP_THRESHOLD, heap.MMAP_THRESHOLD)]


def test_a_refusal_or_another_c_library_is_reported() -> None:
    assert not any(heap.settle({}, _recording([], result=0)).values())
    assert not any(heap.settle({}, lambda: None).values())


#: In a fresh process: free a 4 MiB block (its own pages), then ask for 1 MiB and print how many blocks have pages of
#: their own (mallinfo2's hblks). glibc's dynamic threshold, raised to 4 MiB by the free, puts the 1 MiB on the heap.
_PROBE = """
import ctypes, sys
from daemon import heap
if sys.argv[1] == "settle":
    assert heap.settle({}) == {"MALLOC_ARENA_MAX": True, "MALLOC_MMAP_THRESHOLD_": True}
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                                               "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
big = bytearray(4 << 20)
del big
before = libc.mallinfo2().hblks
block = bytearray(1 << 20)
print(libc.mallinfo2().hblks - before)
"""


def _own_pages_after_a_big_free(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_this_host_s_glibc_keeps_big_blocks_in_pages_of_their_own() -> None:
    """The real mallopt, found through ctypes (the suite runs on Debian's glibc): after a big block is freed, a 1 MiB
    one still gets pages of its own; without the setting it does not (the test would pass without it otherwise)."""
    assert heap._glibc_mallopt() is not None
    assert _own_pages_after_a_big_free("settle") == 1
    assert _own_pages_after_a_big_free("default") == 0


#: In a fresh process: 64 KiB blocks on the heap (under the threshold), all freed but the last (so the heap's top
#: stays held and only the pages below it can go back), then the resident size before and after ``heap.trim``.
_TRIM_PROBE = """
import sys
from daemon import heap
heap.settle({})
def rss():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmRSS"))
blocks = [bytes(64 << 10) for _ in range(2000)]
last = blocks.pop()
del blocks
before = rss()
print(heap.trim(), before - rss())
"""


def test_trim_gives_back_the_pages_of_blocks_freed_below_one_still_held() -> None:
    out = subprocess.run([sys.executable, "-c", _TRIM_PROBE], capture_output=True, text=True, check=True)
    trimmed, freed_kb = out.stdout.split()
    assert trimmed == "True" and int(freed_kb) > 64_000  # of the ~128 MB freed (none without the trim)
    assert not heap.trim(lambda: None)
