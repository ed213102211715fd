"""The HTTP server around the app: request limits, a log that malformed requests cannot flood, the connection cap.

:data:`HTTP_LIMITS` and :data:`HTTP_LOG` go to ``web.AppRunner``; :class:`ConnectionLimit` accepts the connections
itself so that idle clients cannot take every descriptor of the daemon (:func:`connection_budget` of
:func:`descriptor_limit` is how many it may hold).
"""

from __future__ import annotations

import asyncio
import logging
import math
import resource
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

#: Server limits: keyword arguments of ``web.AppRunner``, i.e. of its request handler. A request line or header
#: field longer than 8 KiB is answered 400 before any handler runs. ``keepalive_timeout`` closes a connection idle
#: that long; since aiohttp 3.14.4 it is armed when the connection opens, so a client that trickles its headers
#: (slowloris) is cut off after it too, not held for aiohttp's default of an hour. ``lingering_time`` bounds how
#: long the unread rest of a refused body is drained before closing (bodies are at most 16 KiB).
HTTP_LIMITS: Mapping[str, Any] = {"max_line_size": 8190, "max_field_size": 8190, "keepalive_timeout": 10.0,
                                  "lingering_time": 2.0}
class _MalformedRequests(logging.Filter):
    """aiohttp logs every request its parser refuses (a 400) as an ERROR with a traceback and the offending bytes.

    Anyone who can connect could fill the journal that way, and the bytes may hold an ``Authorization`` header.
    Such records become one WARNING line per ``every`` seconds, naming only the error class and the count; errors
    raised in a handler (500s) pass through unchanged.
    """

    def __init__(self, every: float = 60.0) -> None:
        super().__init__()
        self.every = every
        self.last = -math.inf
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError) or not 400 <= (exc.code or 500) < 500:
            return True
        now = time.monotonic()
        if now - self.last < self.every:
            self.dropped += 1
            return False
        record.msg = "refused a malformed request (%s, %d); %d more since the last such line"
        record.args = (type(exc).__name__, exc.code, self.dropped)
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        self.last, self.dropped = now, 0
        return True


#: The logger of the HTTP server (pass as ``logger=`` with :data:`HTTP_LIMITS`).
HTTP_LOG = logging.getLogger("honestyd.http")
HTTP_LOG.addFilter(_MalformedRequests())

#: Descriptors kept from the HTTP connections for the rest of the daemon (at least; a quarter of the limit when
#: that is more): the store's database, WAL and shared-memory files on each connection, the logs an ingest pass
#: opens, the watcher's inotify descriptor, verification's outbound connections, the model cache, the journal.
RESERVED_FDS = 128
#: Seconds between two looks for room while the server holds all the connections it may.
ROOM_POLL = 0.01
#: Seconds before accept() is tried again after it failed (out of descriptors or memory, or anything else).
ACCEPT_RETRY = 1.0


def connection_budget(soft_limit: int) -> int:
    """The most connections the server may hold under a soft descriptor limit of ``soft_limit``."""
    return max(1, soft_limit - max(RESERVED_FDS, soft_limit // 4))


def descriptor_limit() -> int:
    """This process's soft RLIMIT_NOFILE (unlimited read as 2^20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class ConnectionLimit:
    """Accepts the connections of an aiohttp server itself, never holding more than ``most()`` open at once.

    asyncio's server accepts every connection offered: idle connections took every descriptor, and then each
    failed ``accept()`` logged a traceback and was retried, the store, the logs and the watcher unable to open
    theirs meanwhile. Here, once ``most()`` are open, nothing more is accepted until one closes: new connections
    wait in the kernel's listen queue (and beyond it, their clients retry), and are served in turn. An accept()
    that fails anyway is one line and a second's pause, never a busy loop. :meth:`take_over` the sites' sockets
    once they listen; :meth:`stop` before the sites close.
    """

    def __init__(self, server: web.Server, most: Callable[[], int]) -> None:
        self.server = server
        self.most = most
        #: Times the server reached the cap (an episode ends when a tenth of it is free again).
        self.full = 0
        self._full_since: float | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sockets: list[socket.socket] = []

    def take_over(self, sockets: Iterable[Any]) -> None:
        """Accept on ``sockets`` (listening, e.g. a started site's) from now on, instead of asyncio's server."""
        loop = asyncio.get_running_loop()
        for listening in sockets:
            loop.remove_reader(listening.fileno())  # asyncio's own accept() on it stops here
            sock = listening.dup()  # a socket object to accept on (asyncio lends out only a wrapper of its own)
            sock.setblocking(False)
            self._sockets.append(sock)
            self._tasks.append(loop.create_task(self._accept(sock)))

    async def stop(self) -> None:
        """Stop accepting (the sites still close their own sockets)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in self._sockets:
            sock.close()
        self._tasks, self._sockets = [], []

    def has_room(self) -> bool:
        """Whether one more connection may be accepted now (logs the start and end of each episode at the cap)."""
        most, open_ = self.most(), len(self.server.connections)
        if open_ >= most:
            if self._full_since is None:
                self._full_since = time.monotonic()
                self.full += 1
                HTTP_LOG.warning("holding %d connections, the most [api] max_connections allows: new ones wait to be"
                                 " accepted", open_)
            return False
        if self._full_since is not None and open_ <= most - max(1, most // 10):
            HTTP_LOG.info("accepting connections at once again after %.1f s at the cap",
                          time.monotonic() - self._full_since)
            self._full_since = None
        return True

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.has_room():
                await asyncio.sleep(ROOM_POLL)
                continue
            try:
                conn, _ = await loop.sock_accept(sock)
            except ConnectionAbortedError:
                continue  # the client gave up before it was accepted
            except OSError as exc:
                HTTP_LOG.error("cannot accept connections: %s; trying again in %g s", exc.strerror or exc,
                               ACCEPT_RETRY)
                await asyncio.sleep(ACCEPT_RETRY)
                continue
            try:
                await loop.connect_accepted_socket(self.server, conn)
            except Exception as exc:  # gone before its transport was made: whatever it was, accepting goes on
                HTTP_LOG.debug("accepted connection lost at once: %r", exc)
                conn.close()
