"""What the HTTP handlers ask of the running daemon: the :class:`Backend` protocol, the seam of this sink.

The daemon implements it (daemon/app/backend.py); tests implement it with what they need. Handlers reach it through
``request.app[BACKEND]`` and never import the daemon.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import date, datetime
from typing import Protocol

from aiohttp import web

from collectors.records import Label, Order
from daemon.config import Config
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

    async def histories(self, since: date) -> list[DayCounts]: ...

    async def labels_on(self, decisions: Collection[str]) -> list[Label]: ...

    async def texts_of(self, orders: Collection[Order]) -> dict[Order, str]: ...

    async def unlabelled_failures(self, window: str) -> dict[str, int] | None: ...

    async def label_shown(self, decision: str, reviewer: str, ts: datetime) -> bool: ...


BACKEND: web.AppKey[Backend] = web.AppKey("backend", Backend)
