"""The result of checking one cited source."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckOutcome:
    """One check: ``ok`` True = resolves, False = does not, None = inconclusive (stored, not counted).

    ``status`` is the final HTTP status when there was one; ``detail`` says why, for the audit.
    """

    ok: bool | None
    status: int | None
    detail: str
