"""The systemd notify protocol against a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.notify import EXTEND_BY, Notifier

LOGGER = "honestyd.notify"


@pytest.fixture
def sock_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder for a socket file: tmp_path unless that is too long for sun_path (108 bytes)."""
    if len(str(tmp_path)) < 80:
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(prefix="hn-", dir="/tmp") as short:
        yield Path(short)


def _receiver(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(address)
    sock.settimeout(5)
    return sock


@pytest.fixture
def systemd(sock_dir: Path) -> Iterator[tuple[str, socket.socket]]:
    """(NOTIFY_SOCKET value, the bound socket systemd would be listening on)."""
    path = str(sock_dir / "notify.sock")
    sock = _receiver(path)
    yield path, sock
    sock.close()


def _recv(sock: socket.socket) -> str:
    return sock.recv(4096).decode("utf-8")


def _assert_nothing_pending(sock: socket.socket) -> None:
    sock.settimeout(0.05)
    with pytest.raises(TimeoutError):
        sock.recv(4096)


def test_messages_are_the_exact_datagrams(systemd: tuple[str, socket.socket]) -> None:
    path, sock = systemd
    with Notifier({"NOTIFY_SOCKET": path}) as notifier:
        assert notifier.enabled
        notifier.ready()
        assert _recv(sock) == "READY=1"
        notifier.ready(status="serving 12 agents")
        assert _recv(sock) == "READY=1\nSTATUS=serving 12 agents"
        notifier.status("catching up")
        assert _recv(sock) == "STATUS=catching up"
        notifier.ready_after_reload()
        assert _recv(sock) == "READY=1"
        notifier.ready_after_reload(status="reloaded")
        assert _recv(sock) == "READY=1\nSTATUS=reloaded"
        notifier.stopping()
        assert _recv(sock) == "STOPPING=1"
        notifier.watchdog()
        assert _recv(sock) == "WATCHDOG=1"
    _assert_nothing_pending(sock)


def test_reloading_carries_the_monotonic_clock_in_microseconds(systemd: tuple[str, socket.socket]) -> None:
    path, sock = systemd
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    with Notifier({"NOTIFY_SOCKET": path}) as notifier:
        notifier.reloading()
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    match = re.fullmatch(r"RELOADING=1\nMONOTONIC_USEC=(\d+)", _recv(sock))
    assert match is not None
    assert before <= int(match.group(1)) <= after


def test_status_is_kept_on_one_line(systemd: tuple[str, socket.socket]) -> None:
    path, sock = systemd
    with Notifier({"NOTIFY_SOCKET": path}) as notifier:
        notifier.status("line one\nline two\r\nthree\rfour\0five")
        assert _recv(sock) == "STATUS=line one line two three four five"
        notifier.ready(status="a\nREADY=0")
        assert _recv(sock) == "READY=1\nSTATUS=a READY=0"
        # An undecodable file name's surrogate must not raise; it is replaced.
        notifier.status("bad \udcff name")
        assert _recv(sock) == "STATUS=bad ? name"


def test_abstract_socket() -> None:
    name = f"honestyd-test-{uuid.uuid4().hex}"
    sock = _receiver("\0" + name)
    try:
        with Notifier({"NOTIFY_SOCKET": "@" + name}) as notifier:
            notifier.ready(status="up")
            notifier.watchdog()
        assert _recv(sock) == "READY=1\nSTATUS=up"
        assert _recv(sock) == "WATCHDOG=1"
    finally:
        sock.close()


def test_unset_is_silent_and_opens_no_socket(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    opened: list[object] = []
    monkeypatch.setattr(socket, "socket", lambda *a, **k: opened.append(a))
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    notifier = Notifier({})
    assert not notifier.enabled
    notifier.ready(status="x")
    notifier.status("x")
    notifier.reloading()
    notifier.ready_after_reload()
    notifier.stopping()
    notifier.watchdog()
    notifier.extend_timeout(60)
    notifier.close()
    assert opened == []
    assert caplog.records == []
    # An empty value is what `NOTIFY_SOCKET=` in a unit or a shell gives: also "not under systemd".
    Notifier({"NOTIFY_SOCKET": ""}).ready()
    assert opened == []


def test_defaults_to_the_process_environment(
    systemd: tuple[str, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sock = systemd
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    with Notifier() as notifier:
        notifier.ready()
    assert _recv(sock) == "READY=1"


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    assert Notifier({"WATCHDOG_USEC": "10000000"}).watchdog_interval() == 5.0
    env = {"NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "60000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier(env).watchdog_interval() == 30.0


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"WATCHDOG_USEC": "0"},
        {"WATCHDOG_USEC": "-5"},
        {"WATCHDOG_USEC": "soon"},
        {"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "not-a-pid"},
    ],
)
def test_no_watchdog(env: dict[str, str]) -> None:
    assert Notifier(env).watchdog_interval() is None


def test_watchdog_meant_for_another_process() -> None:
    other = 1 if os.getpid() != 1 else 2
    assert Notifier({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": str(other)}).watchdog_interval() is None


def test_vanished_socket_warns_once_and_never_raises(sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = str(sock_dir / "gone.sock")
    sock = _receiver(path)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    with Notifier({"NOTIFY_SOCKET": path}) as notifier:
        notifier.ready()
        assert _recv(sock) == "READY=1"
        sock.close()
        os.unlink(path)
        notifier.status("nobody listening")
        notifier.watchdog()
        notifier.stopping()
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert warnings[0].name == LOGGER
        assert path in warnings[0].getMessage()
        # The later failures are still recorded, at DEBUG, so they can be found when looked for.
        assert len([r for r in caplog.records if r.levelno == logging.DEBUG]) == 2
        # systemd back (e.g. after daemon-reexec): messages flow again without reopening anything.
        sock = _receiver(path)
        try:
            notifier.status("back")
            assert _recv(sock) == "STATUS=back"
        finally:
            sock.close()


def test_unusable_address_warns_once(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    opened: list[object] = []
    monkeypatch.setattr(socket, "socket", lambda *a, **k: opened.append(a))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    notifier = Notifier({"NOTIFY_SOCKET": "vsock:2:1234"})
    assert not notifier.enabled
    notifier.ready()
    notifier.watchdog()
    assert opened == []
    assert len(caplog.records) == 1
    assert "vsock:2:1234" in caplog.records[0].getMessage()


def test_extend_timeout_is_microseconds(systemd: tuple[str, socket.socket]) -> None:
    path, sock = systemd
    with Notifier({"NOTIFY_SOCKET": path}) as notifier:
        notifier.extend_timeout(EXTEND_BY)
        assert _recv(sock) == f"EXTEND_TIMEOUT_USEC={int(EXTEND_BY * 1_000_000)}"
        notifier.extend_timeout(0.25)
        assert _recv(sock) == "EXTEND_TIMEOUT_USEC=250000"
    _assert_nothing_pending(sock)


def _drain(sock: socket.socket) -> list[str]:
    sock.settimeout(0)
    out = []
    with contextlib.suppress(BlockingIOError):
        while True:
            out.append(_recv(sock))
    sock.settimeout(5)
    return out


def test_keep_extending_without_a_socket_returns_at_once() -> None:
    asyncio.run(asyncio.wait_for(Notifier({}).keep_extending("start", 3600), 5))  # not 3,600 s of no-op pings


def test_keep_extending_pings_every_period_until_cancelled(systemd: tuple[str, socket.socket]) -> None:
    path, sock = systemd

    async def scenario() -> None:
        with Notifier({"NOTIFY_SOCKET": path}, extend_every=0.01, extend_by=7) as notifier:
            task = asyncio.create_task(notifier.keep_extending("start", 3600))
            # Three pings received (the loop stays free meanwhile: the receiver waits on a thread).
            for _ in range(3):
                assert await asyncio.to_thread(_recv, sock) == "EXTEND_TIMEOUT_USEC=7000000"
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert set(_drain(sock)) <= {"EXTEND_TIMEOUT_USEC=7000000"}  # sent before the cancel
        _assert_nothing_pending(sock)  # and none after it (five periods)

    asyncio.run(scenario())


def test_keep_extending_gives_up_past_at_most(
    systemd: tuple[str, socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    """Past ``at_most`` the pings stop on their own, so a start hung in a thread is still ended by systemd."""
    path, sock = systemd
    caplog.set_level(logging.WARNING, logger=LOGGER)
    clock = itertools.count(0, 10).__next__  # ten seconds pass between two looks at the clock

    async def scenario() -> None:
        with Notifier({"NOTIFY_SOCKET": path}, extend_every=0, extend_by=60) as notifier:
            await asyncio.wait_for(notifier.keep_extending("start", 25, clock=clock), 5)

    asyncio.run(scenario())
    # At 0, 10 and 20 s: each ping is sent before the clock is looked at; at 30 s none follows.
    assert [_recv(sock) for _ in range(3)] == ["EXTEND_TIMEOUT_USEC=60000000"] * 3
    _assert_nothing_pending(sock)
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith("the start has run for 30 s: no longer extending systemd's timeout")
