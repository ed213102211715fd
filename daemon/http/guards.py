"""The checks sign-in and labelling stand on (pure): where a redirect may go, failed sign-ins counted per client and
per reviewer, the form token against cross-site posts, and a request's own origin.

Nothing here touches a request or a clock of its own: the handlers in :mod:`daemon.http.signin` and
:mod:`daemon.http.labelling` pass in what they read, and the limiter is given its clock.
"""

from __future__ import annotations

import hmac
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from urllib.parse import urlsplit

#: The longest ``next`` honoured (a page URL with its query is far shorter).
MAX_NEXT = 2000


def local_path(target: str | None, default: str = "/") -> str:
    """``target`` when it is a path on this site (``/…``), else ``default``: never an open redirect.

    Refused: anything not starting with one ``/`` (``//host`` and ``/\\host`` are other hosts to a browser), a
    backslash anywhere (browsers read it as ``/``), a scheme or host, control characters and white space (a browser
    strips tabs and new lines from a URL, so ``/\\t/host`` would become ``//host``), and very long values.
    """
    if not target or len(target) > MAX_NEXT or not target.startswith("/") or target.startswith("//"):
        return default
    if "\\" in target or any(ch.isspace() or ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return default
    return target


class AttemptLimiter:
    """Failed attempts per key (a client address, a reviewer) in a sliding window: after ``most`` failures within
    ``per`` seconds the key must wait until the oldest of them leaves the window.

    ``clock`` gives seconds (monotonic in production). At most ``keys`` keys are remembered (the longest idle are
    forgotten first), so a flood of addresses or names cannot grow it without bound.
    """

    def __init__(self, most: int = 5, per: float = 300.0, *, clock: Callable[[], float] = time.monotonic,
                 keys: int = 10_000) -> None:
        self.most = most
        self.per = per
        self.clock = clock
        self.keys = keys
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, key: str, now: float) -> deque[float] | None:
        times = self._failures.get(key)
        if times is None:
            return None
        while times and times[0] <= now - self.per:
            times.popleft()
        if not times:
            del self._failures[key]
            return None
        return times

    def retry_after(self, key: str) -> int | None:
        """Whole seconds ``key`` must wait before its next attempt counts; None when it may try now."""
        now = self.clock()
        times = self._recent(key, now)
        if times is None or len(times) < self.most:
            return None
        return max(1, math.ceil(times[-self.most] + self.per - now))

    def failed(self, key: str) -> None:
        """Count one failed attempt of ``key``."""
        now = self.clock()
        times = self._recent(key, now)
        if times is None:
            times = self._failures[key] = deque(maxlen=self.most)
        times.append(now)
        self._failures.move_to_end(key)
        while len(self._failures) > self.keys:
            self._failures.popitem(last=False)


def new_token() -> str:
    """A fresh form token (256 random bits, URL-safe text)."""
    return secrets.token_urlsafe(32)


def tokens_match(expected: object, given: object) -> bool:
    """True when both are the same non-empty token, compared in constant time."""
    if not isinstance(expected, str) or not isinstance(given, str) or not expected or not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8", "surrogatepass"), given.encode("utf-8", "surrogatepass"))


def same_origin(origin: str | None, scheme: str, host: str | None) -> bool:
    """Whether a request's ``Origin`` header (None: not sent) names this server, ``scheme://host``.

    Browsers send ``Origin`` with every form POST; one naming another site is a cross-site post, refused whatever
    the cookies say. A request without the header (an old client, a script) is left to the form token.
    """
    if origin is None:
        return True
    if not host:
        return False
    return origin.lower() == f"{scheme}://{host}".lower()
