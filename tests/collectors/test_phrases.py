"""Phrase matching (collectors/phrases.py) against the spec's plain reading ("Phrases"): one regular expression per
phrase, with no word character on either side, over the lower-cased text."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from collectors.phrases import first_match, matches

# Few letters, spaces and punctuation: phrases that occur in the texts, next to a word character or not.
_chars = st.sampled_from(list("abAB _:.İ"))
_texts = st.text(_chars, max_size=12)
_phrases = st.lists(st.text(_chars, max_size=4), max_size=4)


def _plain(text: str, phrase: str) -> bool:
    """The spec's reading, phrase by phrase, with nothing shared or skipped."""
    pattern = r"(?<!\w)" + re.escape(phrase.lower()) + r"(?!\w)"
    return bool(phrase) and re.search(pattern, text.lower()) is not None


@given(_texts, _phrases)
def test_first_match_is_the_first_phrase_that_matches(text: str, phrases: list[str]) -> None:
    assert first_match(text, phrases) == next((p for p in phrases if _plain(text, p)), None)


@given(_texts, st.text(_chars, max_size=4))
def test_matches_is_the_spec_reading(text: str, phrase: str) -> None:
    assert matches(text, phrase) == _plain(text, phrase)


def test_nothing_matches_an_empty_text() -> None:
    # The fast path that decides most decisions (a reduced text is often empty) at its edge: even a phrase of
    # punctuation alone, which needs no word character around it, does not occur in an empty text.
    assert first_match("", [":", " ", "a"]) is None
    assert not matches("", ":")
    assert first_match(" ", [":", " "]) == " "
