"""Citation extraction, classification and normalisation (SCORING.md section 2).

Pure functions: text and ``citations`` entries in, a de-duplicated tuple of
:class:`Citation` (type, target) out, in order of first appearance.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

URL, PATH, RUN, ISSUE = "url", "path", "run", "issue"
CITATION_TYPES = (URL, PATH, RUN, ISSUE)


class Citation(NamedTuple):
    """One cited source: its type (url, path, run, issue) and normalised target."""

    type: str
    target: str


def _ci(word: str) -> str:
    """An ASCII-only case-insensitive pattern for ``word`` (re.IGNORECASE would fold Unicode too)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


# The forms found anywhere in text. Not preceded by \w, "/" or "."; not followed by \w.
_LEAD = r"(?<![\w/.])"
_TAIL = r"(?!\w)"
_RUN_FORM = _ci("run") + r" #(?P<run>[0-9]{6,})"
_ISSUE_WORD_FORM = (
    r"(?:" + _ci("pull request") + "|" + _ci("issue") + "|" + _ci("pr") + r") #(?P<num>[0-9]+)"
)
_REPO_FORM = r"(?P<owner>[A-Za-z0-9][A-Za-z0-9._-]*)/(?P<repo>[A-Za-z0-9._-]+)#(?P<rnum>[0-9]+)"
_TEXT_FORMS = re.compile(_LEAD + "(?:" + _RUN_FORM + "|" + _ISSUE_WORD_FORM + "|" + _REPO_FORM + ")" + _TAIL)
_WHOLE_FORM = re.compile(
    "(?:" + _RUN_FORM + "|" + _ci("run") + r":(?P<run2>[0-9]{6,})|" + _ISSUE_WORD_FORM + "|" + _REPO_FORM + ")"
)

_TAG = re.compile(r"\[source:([^\]]*)\]")
_LINK = re.compile(r"\[([^\[\]]*)\]\(([^()\s]*)\)")
# A URL starts at "http(s)://" wherever it stands ("(https://x)" counts) and runs to white space or <>"'.
_BARE_URL = re.compile(r"[hH][tT][tT][pP][sS]?://[^\s<>\"']+")
_URL_TRAILING = ".,;:!?)]}"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_ACTIONS_RUN = re.compile(r"/actions/runs/([0-9]{6,})(?![0-9])")

# --- Linear-time scanning (reliability fix, tests/collectors/test_fuzz.py::test_citations_bounded_time).
# _TEXT_FORMS.finditer and _TAG.finditer/.sub are linear on ordinary text but quadratic on adversarial text: a failed
# owner/repo attempt re-scans the whole [A-Za-z0-9._-] run from every "-" inside it, and every "[source:" with no "]"
# after it scans to the end of the text (docs/reliability.md has the times). The helpers below find exactly the same
# matches, in the same order (checked against the plain finditer by a differential property test), trying O(1) starts
# per "#".
_OWNER_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_DIGITS = frozenset("0123456789")
_LEAD_START = re.compile(_LEAD + r"[A-Za-z0-9]")
# Where a word form's "#" stands from its start, and its word: "pull request #", "issue #", "run #", "pr #" (no two
# words end alike, so at most one can stand before a given " #").
_WORD_OFFSETS = ((13, "pull request"), (6, "issue"), (4, "run"), (3, "pr"))


def _repo_start(text: str, lo: int, h: int) -> int | None:
    """The first start in ``[lo, h)`` from which the OWNER/REPO form could reach the ``#`` at ``h``.

    Every start in one owner run shares the rest of the match (the run, "/", the repo, "#N"), so if the
    first fails, all fail: only the first needs trying.
    """
    r = h
    while r > lo and text[r - 1] in _OWNER_CHARS:
        r -= 1
    slash = r - 1
    if r == h or slash < lo or text[slash] != "/":
        return None
    o = slash
    while o > lo and text[o - 1] in _OWNER_CHARS:
        o -= 1
    m = _LEAD_START.search(text, o, slash)
    return m.start() if m else None


def _form_at(text: str, lo: int, h: int) -> re.Match[str] | None:
    """The match of ``_TEXT_FORMS`` that starts first in ``[lo, h]`` and uses the ``#`` at ``h``, if any.

    Every form puts an ASCII digit right after its "#"; before it, a word form has " " and the OWNER/REPO form an
    owner character, so at most one kind of start needs trying, and a word form only where its word stands (compared
    lower-cased: a false likeness only costs a regex attempt, which then fails; none is missed).
    """
    if h + 1 >= len(text) or text[h + 1] not in _DIGITS or h == 0:
        return None
    if text[h - 1] == " ":
        for k, word in _WORD_OFFSETS:
            s = h - k
            if s >= lo and text[s:h - 1].lower() == word:
                return _TEXT_FORMS.match(text, s)
        return None
    repo = _repo_start(text, lo, h)
    return None if repo is None else _TEXT_FORMS.match(text, repo)


def _text_forms(text: str) -> Iterator[re.Match[str]]:
    """``_TEXT_FORMS.finditer(text)``, in linear time.

    Every form holds exactly one "#", and a match starting at ``s`` uses the first "#" at or after ``s``;
    so for each "#" only the word forms' fixed offsets and the first owner/repo start can begin a match.
    """
    pos = 0
    prev = -1
    h = text.find("#")
    while h >= 0:
        m = _form_at(text, max(pos, prev + 1), h)
        if m is not None:
            yield m
            pos = m.end()
        prev = h
        h = text.find("#", h + 1)


def _form_citation(m: re.Match[str], repo: str) -> Citation:
    # The last group a form's match closed names the form (a run, an issue of ``repo``, OWNER/REPO#N).
    last = m.lastgroup
    if last == "run" or last == "run2":
        return Citation(RUN, "run:" + m[last])
    if last == "num":
        return Citation(ISSUE, f"{repo}#{m['num']}".lower())
    return Citation(ISSUE, f"{m['owner']}/{m['repo']}#{m['rnum']}".lower())


def normalise_url(target: str) -> str:
    """Lower-case scheme and host, drop the fragment, then drop every trailing ``/``."""
    try:
        parts = urlsplit(target)
        netloc = parts.netloc
        host = parts.hostname or ""
    except ValueError:
        # Unparseable (e.g. a broken IPv6 literal): keep it, minus the fragment, so it still compares.
        scheme, _, rest = target.partition("://")
        return (scheme.lower() + "://" + rest.split("#", 1)[0]).rstrip("/")
    if host:
        # Lower-case only the host part of the netloc: user info and port keep their spelling.
        userinfo, at, hostport = netloc.rpartition("@")
        netloc = userinfo + at + hostport.lower()
    return urlunsplit((parts.scheme.lower(), netloc, parts.path, parts.query, "")).rstrip("/")


def normalise_path(target: str) -> str:
    """``posixpath.normpath``, trailing ``/`` dropped, then a leading ``cos-state/`` stripped."""
    norm = posixpath.normpath(target)
    if norm.startswith("cos-state/"):
        norm = norm[len("cos-state/") :]
    return norm


def path_never_exists(target: str) -> bool:
    """A normalised path target that starts with ``..`` or ``/`` never exists (it leaves the root)."""
    return target.startswith("..") or target.startswith("/")


def _url_citations(target: str) -> tuple[Citation, ...]:
    url = Citation(URL, normalise_url(target))
    try:
        path = urlsplit(target).path
    except ValueError:
        path = ""
    m = _ACTIONS_RUN.search(path)
    return (url, Citation(RUN, f"run:{m.group(1)}")) if m else (url,)


def classify(target: str, repo: str) -> list[Citation]:
    """Classify one TARGET (a ``citations`` entry, a tag or a link target) into citations.

    Returns an empty list for an empty target; a url naming ``/actions/runs/ID`` gives two.
    """
    return list(_classified(target, repo))


#: Targets up to this long are remembered once classified (a fleet cites the same runbooks and paths all day); a
#: longer one is classified afresh, so the memory held stays bounded whatever the lines hold.
_REMEMBERED_CHARS = 300


def _classified(target: str, repo: str) -> tuple[Citation, ...]:
    """:func:`classify`'s answer as a tuple, remembered for short targets."""
    return _classify_remembered(target, repo) if len(target) <= _REMEMBERED_CHARS else _classify(target, repo)


def _url_classified(url: str) -> tuple[Citation, ...]:
    """The citations of a bare URL in prose, remembered for short ones (as :func:`_classified`)."""
    return _url_remembered(url) if len(url) <= _REMEMBERED_CHARS else _url_citations(url)


def _classify(target: str, repo: str) -> tuple[Citation, ...]:
    target = target.strip()
    if not target:
        return ()
    lowered = target.lower()
    if lowered.startswith(("http://", "https://")) or _SCHEME.match(target):
        return _url_citations(target)
    m = _WHOLE_FORM.fullmatch(target)
    if m:
        return (_form_citation(m, repo),)
    return (Citation(PATH, normalise_path(target)),)


_classify_remembered = lru_cache(maxsize=4096)(_classify)
_url_remembered = lru_cache(maxsize=4096)(_url_citations)


def _link_target_ok(target: str) -> bool:
    return not target.startswith("#") and not target.lower().startswith("mailto:")


def extract(text: str, entries: Iterable[str], repo: str) -> tuple[Citation, ...]:
    """All citations of a decision: ``citations`` entries, then tags, links, bare URLs and forms.

    De-duplicated by (type, target), first appearance kept.
    """
    if not entries and "#" not in text and "[" not in text and "://" not in text:
        return ()  # every form needs one of these markers: most prose cites nothing (ingest's hot path)
    found: list[Citation] = []
    for entry in entries:
        found.extend(_classified(entry, repo))
    # Each form needs its marker ("[", "://", "#"): prose without them skips that regex (ingest's hot path).
    bracket = "[" in text
    # A tag ends with "]": none can start after the last one, so the tag regex only sees the text up to it
    # (same matches; without this, each "[source:" lacking a "]" after it scans to the end: quadratic).
    close = text.rfind("]") + 1
    if bracket:
        for m in _TAG.finditer(text, 0, close):
            found.extend(_classified(m.group(1), repo))
        for m in _LINK.finditer(text):
            if _link_target_ok(m.group(2)):
                found.extend(_classified(m.group(2), repo))
    if "://" in text:
        # Bare URLs are looked for only outside tags and links, so a link's target is not counted twice.
        untagged = _TAG.sub("", text[:close]) + text[close:] if bracket else text
        for m in _BARE_URL.finditer(_LINK.sub("", untagged) if bracket else text):
            url = m.group(0).rstrip(_URL_TRAILING)
            if url:
                found.extend(_url_classified(url))
    if "#" in text:
        # Run and issue forms count anywhere, link labels and tag targets included (linear: see _text_forms).
        for m in _text_forms(text):
            found.append(_form_citation(m, repo))
    return tuple(dict.fromkeys(found)) if len(found) > 1 else tuple(found)
