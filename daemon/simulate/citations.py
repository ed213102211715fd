"""What the simulated agents cite: the pools of live and bad sources, the targets cited, the forms citations take.

:func:`citation_target` normalises a citation the way the spec does, so ``.sim/checks.jsonl`` can list the
outcome of every target cited; :class:`Citations` draws sources for a policy and attaches them to a text.
"""

from __future__ import annotations

import posixpath
import random
from typing import NamedTuple
from urllib.parse import urlsplit, urlunsplit

from daemon.simulate.corpus import DEAD_URLS, GHOST_PATHS, LINK_LABELS, LIVE_URLS, REPO, RESOURCE_CSV, RESOURCE_MD
from daemon.simulate.draws import choice


class Cite(NamedTuple):
    """One source: its type (url | run | issue | path) and its value as written."""

    ctype: str
    value: str


def citation_target(ctype: str, value: str) -> str:
    """Normalise a citation the way SCORING.md section 2 "Targets" does.

    ``ctype`` is ``url``, ``run``, ``issue`` or ``path``; ``value`` is the
    URL, the run id (digits), the issue form (``Issue #N``, ``PR #N`` or
    ``owner/repo#N``) or the path.
    """
    if ctype == "url":
        parts = urlsplit(value)
        return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, "")).rstrip("/")
    if ctype == "run":
        return f"run:{value}"
    if ctype == "issue":
        number = value.rsplit("#", 1)[1]
        owner_repo = value.rsplit("#", 1)[0]
        if "/" in owner_repo:
            return f"{owner_repo}#{number}".lower()
        return f"{REPO}#{number}".lower()
    norm = posixpath.normpath(value)
    if norm.startswith("cos-state/"):
        norm = norm[len("cos-state/") :]
    return norm


def rebase_url(url: str, base: str | None) -> str:
    """``https://host/path`` → ``{base}/host/path``, so a local server can stand in for every site."""
    if base is None:
        return url
    return base.rstrip("/") + "/" + url.split("://", 1)[1]


class Citations:
    """The source pools of one simulation (runs and issues drawn from the master seed) and the targets cited."""

    def __init__(self, master: random.Random, url_base: str | None) -> None:
        self.live_urls = tuple(rebase_url(u, url_base) for u in LIVE_URLS)
        self.dead_urls = tuple(rebase_url(u, url_base) for u in DEAD_URLS)
        self.runs: tuple[str, ...] = tuple(str(r) for r in master.sample(range(100_000_000, 100_000_000_000), 24))
        issue_numbers = master.sample(range(100, 2000), 30)
        forms: list[str] = []
        for i, num in enumerate(issue_numbers):
            if i % 5 == 3:
                forms.append(f"PR #{num}")
            elif i % 5 == 4:
                forms.append(f"acme/infra#{num}")
            else:
                forms.append(f"Issue #{num}")
        self.issues: tuple[str, ...] = tuple(forms)
        self.live_pool: tuple[Cite, ...] = (
            tuple(Cite("path", p) for p in RESOURCE_MD + RESOURCE_CSV)
            + tuple(Cite("url", u) for u in self.live_urls)
            + tuple(Cite("run", r) for r in self.runs)
            + tuple(Cite("issue", f) for f in self.issues)
        )
        self.bad_pool: tuple[Cite, ...] = tuple(Cite("path", p) for p in GHOST_PATHS) + tuple(
            Cite("url", u) for u in self.dead_urls
        )
        #: (type, normalised target) of every non-path source cited (their checks go to .sim/checks.jsonl).
        self.targets: set[tuple[str, str]] = set()
        self.target_cache: dict[Cite, tuple[str, str]] = {}

    def target(self, c: Cite) -> tuple[str, str]:
        """(type, normalised target) of ``c``; cached, since sources come from small pools and recur constantly."""
        key = self.target_cache.get(c)
        if key is None:
            key = (c.ctype, citation_target(c.ctype, c.value))
            self.target_cache[c] = key
        return key

    def pick(self, rng: random.Random, policy: str) -> tuple[Cite, ...]:
        """The sources a decision of ``policy`` cites: none, one or two live ones, a bad one for a fabricator."""
        if policy in ("nocite", "nodata"):
            return ()
        cites = [choice(rng, self.live_pool)]
        if rng.random() >= 0.6:
            second = choice(rng, self.live_pool)
            if second != cites[0]:
                cites.append(second)
        if policy == "fabricator" and rng.random() < 0.5:
            cites[0] = choice(rng, self.bad_pool)
        return tuple(cites)

    def attach(
        self,
        rng: random.Random,
        text: str,
        cites: tuple[Cite, ...],
        extra: dict[str, object],
        *,
        in_text: bool = False,
    ) -> str:
        """Attach ``cites`` to a decision, in the text or the citations field."""
        if not cites:
            return text
        for c in cites:
            if c.ctype != "path":
                self.targets.add(self.target(c))
        if not in_text and rng.random() < 0.4:
            field_forms = [self._field_form(rng, c) for c in cites]
            extra["citations"] = field_forms[0] if len(field_forms) == 1 else field_forms
            return text
        forms = [self._text_form(rng, c) for c in cites]
        lead = choice(rng, ("See", "Source:", "Refs:", "Per"))
        return f"{text} {lead} {', '.join(forms)}."

    @staticmethod
    def _field_form(rng: random.Random, c: Cite) -> str:
        if c.ctype == "run":
            return choice(rng, (f"run #{c.value}", f"run:{c.value}"))
        return c.value

    @staticmethod
    def _text_form(rng: random.Random, c: Cite) -> str:
        if c.ctype == "path":
            label = LINK_LABELS.get(c.value, "notes")
            return choice(rng, (f"[source:{c.value}]", f"[{label}]({c.value})"))
        if c.ctype == "url":
            return choice(rng, (c.value, f"[dashboard]({c.value})"))
        if c.ctype == "run":
            return f"run #{c.value}"
        return c.value
