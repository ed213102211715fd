"""``honestyd run``: one asyncio process that watches, ingests, scores, verifies and serves.

:class:`Daemon` wires the rest of honestyd together: collectors (through the ingester) → store → scorers (through
the keeper of the scoring model, daemon/modelkeeper.py) → sinks (/metrics, the API and pages, the history rows,
the changelog). It is one object made of one part per idea, each a module here that builds on the ones below it:

* ``service``: the life — claims, start, main loop, reload, ordered shutdown (signals only set flags);
* ``backend``: what the HTTP API asks (daemon/http/backend.py's ``Backend``), and the HTTP server;
* ``scheduling``: the scheduled jobs (APScheduler) — a new periodic job is one line of ``_start_scheduler``;
* ``reviewing``: the review queue — reviews opened after evaluations and by Alertmanager's notifications, closed by
  reviewers, every event appended to ``reviews/honestyd.jsonl`` and read back from the store;
* ``watching``: the file watcher and the log poller, coalesced into ingest passes — a new source of changed paths
  hands them to ``_on_path``;
* ``evaluations``: each evaluation, and the snapshot the sinks read — a new sink reads :attr:`Daemon.snapshot`
  (or is written after an evaluation, like the ``chronicle``);
* ``chronicle``: today's history rows and the changelog's entries;
* ``storekeeping``: the store opened, its lock, the writes it refuses, damage, a store lost and rebuilt;
* ``state``: the state the parts share, and the constructor; ``options``: the run flags and the test clocks.
"""

from daemon.app.backend import LABELS_FILE, parse_reviewers
from daemon.app.chronicle import HISTORY_EVERY
from daemon.app.options import Overrides, file_clock, warped_clock
from daemon.app.reviewing import REVIEWS_FILE
from daemon.app.service import SWITCH_INTERVAL, Daemon
from daemon.app.watching import MIN_POLL, WATCHED_EVENTS
from daemon.executors import REQUEST_THREADS, Executors
from daemon.ingest import Ingester  # tests reach the daemon's ingester class through daemon.app

__all__ = ["HISTORY_EVERY", "LABELS_FILE", "MIN_POLL", "REQUEST_THREADS", "REVIEWS_FILE", "SWITCH_INTERVAL",
           "WATCHED_EVENTS", "Daemon", "Executors", "Ingester", "Overrides", "file_clock",
           "parse_reviewers", "warped_clock"]
