"""The systemd notify protocol (``sd_notify``) in pure Python, so the daemon needs no python-systemd.

systemd passes ``NOTIFY_SOCKET`` to a ``Type=notify`` service; the service sends ``KEY=VALUE`` lines
as one ``AF_UNIX``/``SOCK_DGRAM`` datagram per message. See sd_notify(3) for the keys used here.

Two rules shape this module:

* Outside systemd (``NOTIFY_SOCKET`` unset: a developer's shell, the tests, another supervisor) every
  method is a silent no-op and no socket is ever created.
* Notification is best effort. A daemon that dies because systemd restarted, or because its notify
  socket vanished, is worse than one whose status line is stale, so send errors are logged once at
  WARNING (then at DEBUG, to keep a flapping socket from flooding the journal) and never raised.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from types import TracebackType

log = logging.getLogger("honestyd.notify")

# STATUS= is one line of the datagram, so a newline would end it early and turn the rest of the text
# into a bogus KEY=VALUE line; systemd also drops a datagram with an embedded NUL byte entirely.
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\0]")


#: Seconds between two ``EXTEND_TIMEOUT_USEC`` messages of a long start or stop: three to an extension, so one ping
#: late behind a busy loop (or one datagram lost) does not let the timeout lapse.
EXTEND_EVERY = 20.0
#: Seconds each of them extends systemd's start or stop timeout by, from its arrival: a start or stop whose event loop
#: stops pinging is killed this long after its last ping (or at the unit's own timeout, if that comes later).
EXTEND_BY = 60.0


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


def _parse_address(value: str) -> str | None:
    """The ``sendto`` address for a ``NOTIFY_SOCKET`` value, or None for a form this module cannot use.

    ``@name`` is a Linux abstract socket, whose address starts with a NUL byte instead of the ``@``.
    """
    if value.startswith("/"):
        return value
    if value.startswith("@") and len(value) > 1:
        return "\0" + value[1:]
    return None


class Notifier:
    """Sends service state to systemd; every method is a no-op when ``NOTIFY_SOCKET`` is unset.

    ``environ`` is the process environment in production (the default) and a plain dict in tests; ``extend_every``
    and ``extend_by`` pace :meth:`keep_extending` (EXTEND_EVERY and EXTEND_BY in production).
    """

    def __init__(self, environ: Mapping[str, str] | None = None, *, extend_every: float = EXTEND_EVERY,
                 extend_by: float = EXTEND_BY) -> None:
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self.extend_every = extend_every
        self.extend_by = extend_by
        raw = self._environ.get("NOTIFY_SOCKET", "")
        self._address = _parse_address(raw) if raw else None
        self._sock: socket.socket | None = None
        self._warned = False
        if raw and self._address is None:
            # e.g. systemd ≥ 254's "vsock:" form: say so once instead of failing on every send.
            self._warn(f"NOTIFY_SOCKET={raw!r} is neither a path nor an @abstract name; not notifying systemd")

    @property
    def enabled(self) -> bool:
        """True when there is a notify socket to send to."""
        return self._address is not None

    def ready(self, status: str | None = None) -> None:
        """Startup finished: ``READY=1`` (plus ``STATUS=`` when given); systemd marks the unit active."""
        self._send("READY=1", status)

    def status(self, text: str) -> None:
        """A free-form one-line status, shown by ``systemctl status``."""
        self._send(None, text)

    def reloading(self) -> None:
        """A reload began (on SIGHUP): ``RELOADING=1`` with ``MONOTONIC_USEC``.

        systemd ≥ 253 requires the timestamp for ``Type=notify-reload`` so it can tell this reload
        from an older one; earlier versions ignore the unknown key.
        """
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self._send(f"RELOADING=1\nMONOTONIC_USEC={usec}", None)

    def ready_after_reload(self, status: str | None = None) -> None:
        """The reload finished: ``READY=1`` again, which ends the reloading state."""
        self._send("READY=1", status)

    def stopping(self) -> None:
        """Shutdown began: ``STOPPING=1``."""
        self._send("STOPPING=1", None)

    def watchdog(self) -> None:
        """Keep-alive ping: ``WATCHDOG=1``; without one per ``WatchdogSec``, systemd kills and restarts us."""
        self._send("WATCHDOG=1", None)

    def extend_timeout(self, seconds: float) -> None:
        """The start (or stop) under way needs more time: ``EXTEND_TIMEOUT_USEC`` of ``seconds`` from now.

        systemd then waits for another message within that time, but never ends the start or stop before the unit's
        own ``TimeoutStartSec=``/``TimeoutStopSec=`` (sd_notify(3); systemd ≥ 236, older ones ignore the key).
        """
        self._send(f"EXTEND_TIMEOUT_USEC={max(1, round(seconds * 1_000_000))}", None)

    async def keep_extending(self, what: str, at_most: float, clock: Callable[[], float] = time.monotonic) -> None:
        """Extend the timeout by :attr:`extend_by` now and every :attr:`extend_every` seconds, until cancelled.

        Run it as a task of the event loop that awaits the start's (or the stop's) phases: only a loop that is free
        pings, so a wedged loop is still killed. Past ``at_most`` seconds (``clock``: monotonic seconds) it stops, with
        one WARNING naming ``what`` (the start, the stop), so that a phase which hangs in a thread while the loop waits
        for it is killed too, if later. Returns at once when there is no notify socket.
        """
        if self._address is None:
            return
        began = clock()
        while True:
            self.extend_timeout(self.extend_by)
            elapsed = clock() - began
            if elapsed >= at_most:
                log.warning("the %s has run for %.0f s: no longer extending systemd's timeout for it (systemd ends"
                            " it %.0f s from now unless it is done, or at the unit's own timeout if that is later)",
                            what, elapsed, self.extend_by)
                return
            await asyncio.sleep(self.extend_every)

    def watchdog_interval(self) -> float | None:
        """Seconds between watchdog pings (half of ``WATCHDOG_USEC``, as sd_watchdog_enabled(3) advises).

        None when there is no watchdog, or it is meant for another process (``WATCHDOG_PID``), or
        either variable is malformed.
        """
        pid = self._environ.get("WATCHDOG_PID")
        if pid is not None:
            try:
                if int(pid) != os.getpid():
                    return None
            except ValueError:
                return None
        try:
            usec = int(self._environ.get("WATCHDOG_USEC", ""))
        except ValueError:
            return None
        if usec <= 0:
            return None
        return usec / 2_000_000

    def close(self) -> None:
        """Close the socket, if one was opened; later sends open a new one."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Notifier:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(self, head: str | None, status: str | None) -> None:
        if self._address is None:
            return
        lines = [head] if head is not None else []
        if status is not None:
            lines.append(f"STATUS={_one_line(status)}")
        # "replace": a lone surrogate (from an undecodable file name in a status text) must not raise.
        payload = "\n".join(lines).encode("utf-8", errors="replace")
        try:
            if self._sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                # Non-blocking: this runs on the event loop, and a stalled systemd must not stall it;
                # a full queue (EAGAIN) just loses this one message.
                sock.setblocking(False)
                self._sock = sock
            # sendto, not connect: each message finds the socket afresh, so a restarted systemd (or
            # a re-created socket file) is picked up without reopening.
            self._sock.sendto(payload, self._address)
        except OSError as exc:
            self._warn(f"cannot notify systemd at {self._environ.get('NOTIFY_SOCKET')!r}: {exc}")

    def _warn(self, message: str) -> None:
        if self._warned:
            log.debug("%s", message)
        else:
            self._warned = True
            log.warning("%s (further notify errors are logged at DEBUG)", message)
