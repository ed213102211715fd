"""The Wilson score interval for a binomial proportion."""

from __future__ import annotations

import math


def wilson(passed: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson interval of ``passed/n`` at the given ``z`` (1.96 ≈ 95 %), clamped to [0, 1]."""
    if n <= 0:
        raise ValueError("n must be positive")
    p = passed / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
