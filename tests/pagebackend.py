"""A backend for in-process tests of the pages, sign-in and labelling handlers (daemon/http/backend.py's protocol):
a real state directory scored by the pure evaluation, the labels a test posts kept in memory and scored with it, a
review queue folded from real review events (opened by the real opening rule, or given by the test); and the sign-in
as a browser does it, on an aiohttp test client."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient

from collectors.batch import scan_state
from collectors.records import DayCounts, Label, Order
from collectors.reviews import ReviewEvent, parse_review_event
from collectors.rfc3339 import parse_ts
from daemon.config import Config, GitHub
from daemon.reviews import events as review_events
from daemon.reviews.queue import Queue, Review, ReviewRefused
from daemon.reviews.rule import due, firing
from daemon.snapshot import Counters, Snapshot, build_snapshot
from scorers.context import Context, Records
from scorers.score import AgentResult, evaluate_window

#: The reviewers of the in-process tests, {name: token}.
REVIEWERS = {"alice": "tok-alice", "maya": "tok-maya"}


class PageBackend:
    """What the handlers ask of the daemon, over ``root`` evaluated at ``now`` (see the module)."""

    def __init__(self, root: Path, now: datetime, reviewers: dict[str, str], config: Config | None = None) -> None:
        self._config = config or Config(github=GitHub(repo="acme/app"))
        scan = scan_state(root, self._config)
        self.events = list(scan.events)
        self.base_labels = list(scan.labels)
        self.files = scan.files
        self.at = now
        self.tokens = {token: name for name, token in reviewers.items()}
        self.appended: list[dict[str, str]] = []
        #: How many looks ``label_shown`` answers False to before True (the daemon reading its line back).
        self.shown_after = 0
        self.looks = 0
        self.written_fails: OSError | None = None
        self._snapshot = self._evaluate()
        self.review_lines: list[ReviewEvent] = []
        self.queue = Queue()
        #: What closing a review raises instead (the review file refused).
        self.close_fails: OSError | None = None

    # --- the review queue, as daemon/app/reviewing.py keeps it (without the file)

    def add_review_events(self, events: Sequence[Mapping[str, Any]]) -> list[ReviewEvent]:
        """Take in review events as lines of reviews/honestyd.jsonl and fold the queue again."""
        parsed = []
        for e in events:
            line = parse_review_event(review_events.encode(e)[0][:-1], "reviews/honestyd.jsonl",
                                      len(self.review_lines) + 1)
            assert isinstance(line, ReviewEvent), line
            self.review_lines.append(line)
            parsed.append(line)
        self.queue = Queue.fold(self.review_lines)
        return parsed

    def open_due_reviews(self) -> list[Review]:
        """Open the reviews the opening rule finds due at the first evaluation (the evidence from the audit)."""
        todo = due(firing(self._snapshot), self.queue, None)
        audits = {c.key: self._audit(c.agent, c.window) for c in todo}
        failing = {key: None if a is None else review_events.failed_rows(a) for key, a in audits.items()}
        opened = self.add_review_events(review_events.openings(todo, self.queue, self.at, failing, at_start=True))
        return [r for r in (self.queue.get(e.review) for e in opened) if r is not None]

    def review_list(self, state: str | None = None) -> list[Review]:
        return self.queue.listing(state)

    def review(self, review_id: str) -> Review | None:
        return self.queue.get(review_id)

    async def close_review(self, review_id: str, reviewer: str, note: str) -> Review:
        review = self.queue.get(review_id)
        if review is None:
            raise ReviewRefused(404, f"no review {review_id!r}")
        if not review.is_open:
            raise ReviewRefused(409, f"review {review_id} is closed already")
        if self.close_fails is not None:
            raise self.close_fails
        self.add_review_events([review_events.closing(review_id, self.at, reviewer, note)])
        closed = self.queue.get(review_id)
        assert closed is not None
        return closed

    def _labels(self) -> list[Label]:
        return [*self.base_labels, *(Label(parse_ts(lb["ts"]), lb["decision"], lb["value"], lb["reviewer"],
                                           "labels/api.jsonl", k + 1, 0, lb.get("note"))
                                     for k, lb in enumerate(self.appended))]

    def _records(self) -> Records:
        return Records(self.events, self._labels(), self.files, [])

    def _evaluate(self) -> Snapshot:
        return build_snapshot(self._records(), self.at, self._config, Counters())

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    @property
    def config(self) -> Config:
        return self._config

    @property
    def unready(self) -> str | None:
        return None

    def reviewers(self) -> dict[str, str]:
        return dict(self.tokens)

    def now(self) -> datetime:
        return self.at

    def changelog_text(self) -> str:
        return ""

    async def knows_decision(self, decision: str) -> bool | None:
        return any(e.id == decision for e in self.events)

    async def append_label(self, label: dict[str, str]) -> None:
        if self.written_fails is not None:
            raise self.written_fails
        self.appended.append(label)
        self._snapshot = self._evaluate()
        listing = [r for r in self.queue.listing("open") if label["decision"] in r.failed_ids()]
        self.add_review_events([review_events.labelling(r.id, self.at, label["decision"], label["value"],
                                                        label["reviewer"]) for r in listing])

    async def history(self, agent: str) -> list[DayCounts]:
        return []

    async def histories(self, since: date) -> list[DayCounts]:
        return []

    def _audit(self, agent: str, window: str) -> AgentResult | None:
        result = evaluate_window(Context(self._records(), self.at, self._config), window, agents=[agent])
        return result.agents.get(agent)

    async def audit(self, agent: str, window: str) -> tuple[datetime, AgentResult] | None:
        found = self._audit(agent, window)
        return None if found is None else (self.at, found)

    async def labels_on(self, decisions: Collection[str]) -> list[Label]:
        return [lb for lb in self._labels() if lb.decision in decisions]

    async def texts_of(self, orders: Collection[Order]) -> dict[Order, str]:
        return {e.order: e.text for e in self.events if e.order in orders}

    async def unlabelled_failures(self, window: str) -> dict[str, int] | None:
        return None

    async def label_shown(self, decision: str, reviewer: str, ts: datetime) -> bool:
        self.looks += 1
        return self.looks > self.shown_after


def with_config(backend: PageBackend, **api: object) -> PageBackend:
    """``backend`` with ``[api]`` settings changed (say public_url)."""
    backend._config = replace(backend._config, api=replace(backend._config.api, **api))  # type: ignore[arg-type]
    return backend


async def form_token(client: TestClient[Any, Any], path: str = "/login") -> str:
    """The form token on the page at ``path`` (the session's, set by the page when it had none)."""
    resp = await client.get(path)
    assert resp.status == 200
    found = re.search(r'name="csrf_token" value="([^"]+)"', await resp.text())
    assert found is not None
    return found.group(1)


async def login(client: TestClient[Any, Any], reviewer: str, token: str, next_path: str = "/", csrf: str | None = None,
                headers: dict[str, str] | None = None) -> Any:
    """POST /login as the sign-in form does (with the form token of a fresh GET /login unless ``csrf`` is given)."""
    csrf = await form_token(client) if csrf is None else csrf
    return await client.post("/login", data={"csrf_token": csrf, "reviewer": reviewer, "token": token,
                                             "next": next_path}, allow_redirects=False, headers=headers or {})
