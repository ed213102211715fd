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
    if not phrase or not text:
        return False  # an empty phrase matches nothing, and nothing but it could occur in an empty text
    return _pattern(phrase).search(text.lower()) is not None


@lru_cache(maxsize=64)
def _any_pattern(phrases: tuple[str, ...]) -> re.Pattern[str] | None:
    # One alternation per list: a million decisions are checked against each list per evaluation.
    alternatives = sorted({p.lower() for p in phrases if p}, key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in alternatives) + r")(?!\w)")


def first_match(text: str, phrases: Iterable[str]) -> str | None:
    """The first phrase (in the given order) that matches ``text``, or None."""
    if not text:
        return None  # only an empty phrase could occur in it, and an empty phrase matches nothing
    return _first_match(text, tuple(phrases))


@lru_cache(maxsize=1024)
def _first_match(text: str, ordered: tuple[str, ...]) -> str | None:
    any_pattern = _any_pattern(ordered)
    if any_pattern is None:
        return None
    lowered = text.lower()
    if any_pattern.search(lowered) is None:
        return None  # the common case, decided by one search
    for phrase in ordered:
        if phrase and _pattern(phrase).search(lowered) is not None:
            return phrase
    return None
