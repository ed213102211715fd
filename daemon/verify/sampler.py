"""The deterministic daily sample of spec 3.3: the same target and day always give the same answer."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import date
from typing import TypeVar

T = TypeVar("T")


def sample_value(target: str, day: date) -> float:
    """``int(sha256(f"{target}|{D:%Y-%m-%d}").hexdigest()[:8], 16) / 2**32`` — uniform in [0, 1)."""
    digest = hashlib.sha256(f"{target}|{day:%Y-%m-%d}".encode()).hexdigest()
    return int(digest[:8], 16) / 2**32


def sampled(target: str, day: date, rate: float) -> bool:
    """True iff the daily sampler checks ``target`` on ``day`` at the given rate."""
    return sample_value(target, day) < rate


def daily_sample(targets: Iterable[tuple[str, str]], day: date, rates: Mapping[str, float]) -> list[tuple[str, str]]:
    """The (type, target) pairs the sampler checks on ``day`` (a type without a rate is never sampled)."""
    return [(kind, target) for kind, target in targets if sampled(target, day, rates.get(kind, 0.0))]
