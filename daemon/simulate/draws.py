"""Seeded draws and simulated time for the simulator: every random choice goes through these few functions.

random.choice/randrange go through ``_randbelow``, several times slower than one ``random()`` call, and the
simulator draws a few times per event; these take one ``random()`` each. Times are whole epoch seconds,
written as RFC 3339 UTC.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import TypeVar

from daemon.simulate.corpus import SERVICES

_T = TypeVar("_T")

DAY = 86_400
HOUR = 3_600
MIN = 60

# Dates by day number: days repeat, and strftime is far slower than a dict lookup.
_DATE_CACHE: dict[int, str] = {}


def day_text(epoch: int) -> str:
    """The UTC date of ``epoch`` (``YYYY-MM-DD``)."""
    day = epoch // DAY
    date = _DATE_CACHE.get(day)
    if date is None:
        date = time.strftime("%Y-%m-%d", time.gmtime(day * DAY))
        _DATE_CACHE[day] = date
    return date


def ts_text(epoch: int) -> str:
    """RFC 3339 UTC with ``Z``, whole seconds."""
    minutes, sec = divmod(epoch % DAY, 60)
    hour, minute = divmod(minutes, 60)
    return f"{day_text(epoch)}T{hour:02d}:{minute:02d}:{sec:02d}Z"


def choice(rng: random.Random, seq: Sequence[_T]) -> _T:
    """One element of ``seq``."""
    return seq[int(rng.random() * len(seq))]


def randint(rng: random.Random, lo: int, hi: int) -> int:
    """Uniform integer in ``[lo, hi)``."""
    return lo + int(rng.random() * (hi - lo))


def weighted(rng: random.Random, weights: tuple[tuple[str, int], ...]) -> str:
    """One name of ``weights`` ((name, weight) pairs), drawn in proportion to its weight."""
    roll = rng.random() * sum(w for _, w in weights)
    for name, w in weights:
        if roll < w:
            return name
        roll -= w
    return weights[-1][0]


def fill(rng: random.Random, template: str, **extra: str) -> str:
    """``template`` with a service, a latency, a percentage and a count drawn (and ``extra``)."""
    return template.format(
        svc=choice(rng, SERVICES),
        ms=str(randint(rng, 80, 400)),
        pct=str(randint(rng, 2, 60)),
        n=str(randint(rng, 2, 30)),
        **extra,
    )
