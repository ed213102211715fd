"""Phrase matching as the spec defines it (SCORING.md, "Phrases").

A phrase matches when it occurs in the lower-cased text with no Unicode word character
(``\\w``) immediately before or after it; both sides are lower-cased with ``str.lower()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache


@lru_cache(maxsize=512)
def _pattern(phrase: str) -> re.Pattern[str]:
    # Lookarounds rather than \b: a phrase may itself start or end with a non-word char ("reason:").
    return re.compile(r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)")


def matches(text: str, phrase: str) -> bool:
    """True iff ``phrase`` occurs in ``text`` as the spec's phrase rule says."""
    if not phrase:
        return False
    return _pattern(phrase).search(text.lower()) is not None


def first_match(text: str, phrases: Iterable[str]) -> str | None:
    """The first phrase (in the given order) that matches ``text``, or None."""
    lowered = text.lower()
    for phrase in phrases:
        if phrase and _pattern(phrase).search(lowered) is not None:
            return phrase
    return None
