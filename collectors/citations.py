"""Citation extraction, classification and normalisation (SCORING.md section 2).

Pure functions: text and ``citations`` entries in, a de-duplicated tuple of
:class:`Citation` (type, target) out, in order of first appearance.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
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
_LEAD_START = re.compile(_LEAD + r"[A-Za-z0-9]")
# Where a form's "#" stands from its start: "pull request #", "issue #", "run #", "pr #".
_WORD_OFFSETS = (13, 6, 4, 3)


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


def _text_forms(text: str) -> Iterator[re.Match[str]]:
    """``_TEXT_FORMS.finditer(text)``, in linear time.

    Every form holds exactly one "#", and a match starting at ``s`` uses the first "#" at or after ``s``;
    so for each "#" only the word forms' fixed offsets and the first owner/repo start can begin a match.
    """
    pos = 0
    prev = -1
    h = text.find("#")
    while h >= 0:
        lo = max(pos, prev + 1)
        starts = {h - k for k in _WORD_OFFSETS if h - k >= lo}
        repo = _repo_start(text, lo, h)
        if repo is not None:
            starts.add(repo)
        for s in sorted(starts):
            m = _TEXT_FORMS.match(text, s)
            if m is not None:
                yield m
                pos = m.end()
                break
        prev = h
        h = text.find("#", h + 1)


def _form_citation(m: re.Match[str], repo: str) -> Citation:
    groups = m.groupdict()
    run = groups.get("run") or groups.get("run2")
    if run:
        return Citation(RUN, f"run:{run}")
    if groups.get("num"):
        return Citation(ISSUE, f"{repo}#{groups['num']}".lower())
    return Citation(ISSUE, f"{groups['owner']}/{groups['repo']}#{groups['rnum']}".lower())


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


def _url_citations(target: str) -> list[Citation]:
    normalised = normalise_url(target)
    found = [Citation(URL, normalised)]
    try:
        path = urlsplit(target).path
    except ValueError:
        path = ""
    m = _ACTIONS_RUN.search(path)
    if m:
        found.append(Citation(RUN, f"run:{m.group(1)}"))
    return found


def classify(target: str, repo: str) -> list[Citation]:
    """Classify one TARGET (a ``citations`` entry, a tag or a link target) into citations.

    Returns an empty list for an empty target; a url naming ``/actions/runs/ID`` gives two.
    """
    target = target.strip()
    if not target:
        return []
    lowered = target.lower()
    if lowered.startswith(("http://", "https://")) or _SCHEME.match(target):
        return _url_citations(target)
    m = _WHOLE_FORM.fullmatch(target)
    if m:
        return [_form_citation(m, repo)]
    return [Citation(PATH, normalise_path(target))]


def _link_target_ok(target: str) -> bool:
    return not target.startswith("#") and not target.lower().startswith("mailto:")


def extract(text: str, entries: Iterable[str], repo: str) -> tuple[Citation, ...]:
    """All citations of a decision: ``citations`` entries, then tags, links, bare URLs and forms.

    De-duplicated by (type, target), first appearance kept.
    """
    found: list[Citation] = []
    for entry in entries:
        found.extend(classify(entry, repo))
    # Each form needs its marker ("[", "://", "#"): prose without them skips that regex (ingest's hot path).
    bracket = "[" in text
    # A tag ends with "]": none can start after the last one, so the tag regex only sees the text up to it
    # (same matches; without this, each "[source:" lacking a "]" after it scans to the end: quadratic).
    close = text.rfind("]") + 1
    if bracket:
        for m in _TAG.finditer(text, 0, close):
            found.extend(classify(m.group(1), repo))
        for m in _LINK.finditer(text):
            if _link_target_ok(m.group(2)):
                found.extend(classify(m.group(2), repo))
    if "://" in text:
        # Bare URLs are looked for only outside tags and links, so a link's target is not counted twice.
        untagged = _TAG.sub("", text[:close]) + text[close:] if bracket else text
        for m in _BARE_URL.finditer(_LINK.sub("", untagged) if bracket else text):
            url = m.group(0).rstrip(_URL_TRAILING)
            if url:
                found.extend(_url_citations(url))
    if "#" in text:
        # Run and issue forms count anywhere, link labels and tag targets included (linear: see _text_forms).
        for m in _text_forms(text):
            found.append(_form_citation(m, repo))
    return tuple(dict.fromkeys(found)) if len(found) > 1 else tuple(found)
