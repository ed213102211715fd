"""What the HTTP handlers ask of the running daemon: the :class:`Backend` protocol, the seam of this sink.

The daemon implements it (daemon/app/backend.py); tests implement it with what they need. Handlers reach it through
``request.app[BACKEND]`` and never import the daemon.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Protocol

from aiohttp import web

from collectors.records import Label, Order
from daemon.config import Config
from daemon.reviews.alertmanager import Notification
from daemon.reviews.queue import Review
from daemon.snapshot import Snapshot
from scorers.history import DayCounts
from scorers.score import AgentResult


class Backend(Protocol):
    """What the handlers need from the running daemon."""

    @property
    def snapshot(self) -> Snapshot | None: ...

    @property
    def config(self) -> Config: ...

    @property
    def unready(self) -> str | None: ...

    def reviewers(self) -> Mapping[str, str]: ...

    def now(self) -> datetime: ...

    def changelog_text(self) -> str: ...

    async def knows_decision(self, decision: str) -> bool | None: ...

    async def append_label(self, label: dict[str, str]) -> None: ...

    async def history(self, agent: str) -> list[DayCounts]: ...

    async def audit(self, agent: str, window: str) -> tuple[datetime, AgentResult] | None: ...

    # --- the review queue (daemon/app/reviewing.py); render with daemon/reviews/views.py at ``now()``

    def review_list(self, state: str | None = None) -> Sequence[Review]:
        """Open reviews first, oldest first, then closed ones; ``state`` "open" or "closed" keeps only those. Each
        gives its progress (``Review.progress()``, ``views.progress_text``) and age (``Review.age(now)``)."""

    def review(self, review_id: str) -> Review | None:
        """One review with its evidence (the decisions that failed), labels, alerts and history."""

    async def close_review(self, review_id: str, reviewer: str, note: str) -> Review:
        """Append the ``closed`` event (the pages pass the signed-in reviewer); raises
        :class:`daemon.reviews.queue.ReviewRefused` (404, 409, 400) or OSError (the review file refused)."""

    def alert_token(self) -> str | None:
        """The bearer token Alertmanager's webhook must carry (None: none configured, every post refused)."""

    async def alert_notification(self, notification: Notification) -> Mapping[str, Any]:
        """Record an Alertmanager notification on the reviews it concerns; the summary is the webhook's answer."""

    async def histories(self, since: date) -> list[DayCounts]: ...

    async def labels_on(self, decisions: Collection[str]) -> list[Label]: ...

    async def texts_of(self, orders: Collection[Order]) -> dict[Order, str]: ...

    async def unlabelled_failures(self, window: str) -> dict[str, int] | None: ...

    async def label_shown(self, decision: str, reviewer: str, ts: datetime) -> bool: ...


BACKEND: web.AppKey[Backend] = web.AppKey("backend", Backend)
