"""The running daemon as the HTTP API and pages see it (daemon/http/backend.py's ``Backend``), and the HTTP
server it starts on the sockets bound at start-up: the latest snapshot, audits built from the model on request,
stored histories, reviewers' and Alertmanager's tokens, and label writes (the review queue's own reads and writes
are daemon/app/reviewing.py's)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Collection
from datetime import date, datetime
from pathlib import Path
from typing import TypeVar

from aiohttp import web

from collectors.records import Label, Order
from daemon import logsetup, safefile
from daemon.app.scheduling import Scheduling
from daemon.config import Config
from daemon.executors import run_in
from daemon.http.app import make_app
from daemon.http.server import HTTP_LIMITS, HTTP_LOG, ConnectionLimit, connection_budget, descriptor_limit
from daemon.http.sessions import session_key
from daemon.modelkeeper import LiveFeed
from daemon.snapshot import Snapshot
from daemon.store import Store
from scorers.history import DayCounts
from scorers.score import AgentResult

log = logging.getLogger("honestyd")
T = TypeVar("T")

LABELS_FILE = "labels/api.jsonl"


def parse_reviewers(text: str) -> dict[str, str]:
    """``reviewer:token`` pairs separated by commas or new lines → {token: reviewer}."""
    tokens: dict[str, str] = {}
    for item in text.replace("\n", ",").split(","):
        reviewer, sep, token = item.strip().partition(":")
        if sep and reviewer.strip() and token.strip():
            tokens[token.strip()] = reviewer.strip()
    return tokens


class HttpBackend(Scheduling):
    """What the handlers ask of the daemon, and the server that runs them."""

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest evaluation (None before the first)."""
        return self._snapshot

    @property
    def config(self) -> Config:
        """The configuration in force."""
        return self._config

    def now(self) -> datetime:
        """The daemon's clock."""
        return self.clock()

    def reviewers(self) -> dict[str, str]:
        """{token: reviewer} from the configured environment variable and credentials file."""
        api = self._config.api
        tokens = parse_reviewers(self.environ.get(api.reviewers_env, "")) if api.reviewers_env else {}
        if api.reviewers_file:
            try:
                tokens.update(parse_reviewers(Path(api.reviewers_file).read_text(encoding="utf-8")))
            except OSError as exc:
                log.warning("reviewers file %s: %s", api.reviewers_file, exc.strerror)
        return tokens

    async def history(self, agent: str) -> list[DayCounts]:
        """The stored daily counts of one agent."""
        assert self.lock is not None and self.store is not None
        if self._recovering:
            raise web.HTTPServiceUnavailable(text="the store is being rebuilt from the state root")
        store = self.store
        return await self._locked(lambda: store.history(agent))

    async def knows_decision(self, decision: str) -> bool | None:
        """Whether a record with this id is stored (None: the model is still loading, so it cannot tell yet)."""
        return await self.keeper.knows(decision, self._config.db_path)

    async def append_label(self, label: dict[str, str]) -> None:
        """Append one label line to ``labels/api.jsonl`` (one write, O_APPEND) and ingest it.

        Raises OSError, logged as an ERROR naming the path: :class:`safefile.RefusedFile` when that name, or
        ``labels``, is not a regular file (a directory) inside the state root (a symlink, a FIFO, a device).
        """
        line = (json.dumps(label, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            await run_in(self.executors.ingest, safefile.append, self._config.state_root, LABELS_FILE, line)
        except OSError as exc:
            log.error("label not written: %s: %s", exc.filename, exc.strerror)
            raise
        self._on_path(LABELS_FILE)
        await self.label_reviews(label["decision"], label["value"], label["reviewer"])

    def alert_token(self) -> str | None:
        """The bearer token Alertmanager posts with: ``[alerts] token_file``'s content, else the ``token_env``
        environment variable; None when neither gives one (the webhook then refuses every request)."""
        alerts = self._config.alerts
        if alerts.token_file:
            try:
                token = Path(alerts.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                log.warning("alerts token file %s: %s", alerts.token_file, exc.strerror)
            else:
                if token:
                    return token
        token = self.environ.get(alerts.token_env, "").strip() if alerts.token_env else ""
        return token or None

    async def _read(self, read: Callable[[Store], T]) -> T:
        """``read`` on a read-only connection of its own, on the request executor (not behind the ingest lock)."""
        db = self._config.db_path

        def ask() -> T:
            with Store.open(db, readonly=True) as reader, reader.reading():
                return read(reader)

        return await run_in(self.executors.requests, ask)

    async def histories(self, since: date) -> list[DayCounts]:
        """Every agent's stored days from ``since`` on (the index's sparklines)."""
        if self._recovering:
            raise web.HTTPServiceUnavailable(text="the store is being rebuilt from the state root")
        return await self._read(lambda r: r.history_since(since))

    async def labels_on(self, decisions: Collection[str]) -> list[Label]:
        """Every stored label on these decisions, with its note ([] while the store is being rebuilt)."""
        if self._recovering or not decisions:
            return []
        return await self._read(lambda r: r.labels_with_notes(decisions))

    async def texts_of(self, orders: Collection[Order]) -> dict[Order, str]:
        """The stored texts of the records at these positions: the model keeps only the phrases its rules match."""
        if self._recovering or not orders:
            return {}
        return await self._read(lambda r: r.texts_of(orders))

    async def unlabelled_failures(self, window: str) -> dict[str, int] | None:
        """Per agent, the window's decisions failing a component with no label (None: no model yet)."""
        feed = self.keeper.feed
        if feed is None:
            return None
        return await run_in(self.executors.requests, feed.unlabelled_failures, window)

    async def label_shown(self, decision: str, reviewer: str, ts: datetime) -> bool:
        """Whether the last evaluation saw this reviewer's label of time ``ts`` on the decision."""
        feed = self.keeper.feed
        if feed is None:
            return False
        return await run_in(self.executors.requests, feed.shows_label, decision, reviewer, ts)

    async def audit(self, agent: str, window: str) -> tuple[datetime, AgentResult] | None:
        """One agent's result with every audit row, built on request from the model (not kept per snapshot)."""
        feed = self.keeper.feed
        if feed is None:
            return None
        return await run_in(self.executors.requests, self._audit_rows, feed, agent, window)

    def _audit_rows(self, feed: LiveFeed, agent: str, window: str) -> tuple[datetime, AgentResult] | None:
        found = feed.agent_result(agent, window)
        if found is not None:
            self.freezer.after_audit()  # its rows live until it is answered: no collection walks them meanwhile
        return found

    def _host(self) -> str:
        return self._config.daemon.listen.rpartition(":")[0].strip("[]")

    async def _start_http(self) -> None:
        # HTTP_LIMITS: header size limits and the idle/slow-client cut-off; HTTP_LOG: malformed requests logged as
        # one rate-limited line, not a traceback each (daemon/http/server.py). They are keyword arguments of the request
        # handler, passed straight through: an unknown one would make aiohttp drop them all, access_log=None
        # included, with only a warning.
        # A thread of its own: the request threads may all be busy already (a test holds them), and this is once.
        key = await asyncio.to_thread(session_key, self._config.db_path.parent, self.environ)
        app = make_app(self, executor=self.executors.requests, session_key=key, metrics=self.metrics_cache)
        runner = web.AppRunner(app, access_log=None, logger=HTTP_LOG, **HTTP_LIMITS)
        await runner.setup()
        # No more connections than the descriptor limit leaves room for (see ConnectionLimit); a failed accept()
        # is one line, not a traceback (and repeats are counted: daemon/logsetup.py).
        limit = descriptor_limit()
        budget = connection_budget(limit)
        if budget < self._config.api.max_connections:
            log.warning("[api] max_connections = %d, but a descriptor limit of %d leaves room for %d connections:"
                        " holding at most that many (raise LimitNOFILE= to allow more)",
                        self._config.api.max_connections, limit, budget)
        asyncio.get_running_loop().set_exception_handler(logsetup.loop_exception_handler)
        assert self._listeners, "serve() binds the listening sockets first"
        sockets = self._listeners
        for sock in sockets:  # bound by _claim, before anything was ingested or written
            await web.SockSite(runner, sock).start()
        self.port = int(sockets[0].getsockname()[1])
        self.runner = runner
        assert runner.server is not None
        self.connections = ConnectionLimit(runner.server, lambda: min(self._config.api.max_connections, budget))
        self.connections.take_over(sockets)
