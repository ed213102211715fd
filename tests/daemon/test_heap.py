"""daemon/heap.py: the daemon asks glibc for one malloc arena, unless the environment already chose."""

from __future__ import annotations

from collections.abc import Callable

from daemon import heap


def _recording(calls: list[tuple[int, int]], result: int = 1) -> Callable[[], Callable[[int, int], int]]:
    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return result

    return lambda: mallopt


def test_one_arena_is_asked_of_malloc() -> None:
    calls: list[tuple[int, int]] = []
    assert heap.one_arena({}, _recording(calls)) is True
    assert calls == [(heap.M_ARENA_MAX, 1)]


def test_the_environment_s_choice_is_left_alone() -> None:
    calls: list[tuple[int, int]] = []
    assert heap.one_arena({"MALLOC_ARENA_MAX": "4"}, _recording(calls)) is False
    assert calls == []


def test_a_refusal_or_another_c_library_is_reported() -> None:
    assert heap.one_arena({}, _recording([], result=0)) is False
    assert heap.one_arena({}, lambda: None) is False


def test_this_host_s_glibc_takes_the_setting() -> None:
    """The real mallopt, found through ctypes (the suite runs on Debian's glibc)."""
    assert heap._glibc_mallopt() is not None
    assert heap.one_arena({}) is True
