"""Citation extraction, classification and normalisation (SCORING.md section 2).

Pure functions: text and ``citations`` entries in, a de-duplicated tuple of
:class:`Citation` (type, target) out, in order of first appearance.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
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
    if bracket:
        for m in _TAG.finditer(text):
            found.extend(classify(m.group(1), repo))
        for m in _LINK.finditer(text):
            if _link_target_ok(m.group(2)):
                found.extend(classify(m.group(2), repo))
    if "://" in text:
        # Bare URLs are looked for only outside tags and links, so a link's target is not counted twice.
        for m in _BARE_URL.finditer(_LINK.sub("", _TAG.sub("", text)) if bracket else text):
            url = m.group(0).rstrip(_URL_TRAILING)
            if url:
                found.extend(_url_citations(url))
    if "#" in text:
        # Run and issue forms count anywhere, link labels and tag targets included.
        for m in _TEXT_FORMS.finditer(text):
            found.append(_form_citation(m, repo))
    return tuple(dict.fromkeys(found)) if len(found) > 1 else tuple(found)
