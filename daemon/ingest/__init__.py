"""Exactly-once ingestion of a state directory into the store.

One pass (:meth:`Ingester.scan`) walks the root in read order, updates the file index, tails every JSON Lines source
from its saved cursor and re-parses changed Markdown and report files. Rows, rejects and the cursor that produced
them are committed in one transaction per batch, so a crash at any point loses nothing and doubles nothing.

* :mod:`~daemon.ingest.passes`: the :class:`Ingester` and its passes (a scan, one path, a watcher's batch of paths
  in transaction groups);
* :mod:`~daemon.ingest.index`: the file index; :mod:`~daemon.ingest.logs`: tailing JSON Lines;
  :mod:`~daemon.ingest.documents`: Markdown files and reports, parsed whole; :mod:`~daemon.ingest.parse`: lines as
  records (pure); :mod:`~daemon.ingest.state`: what the parts share.

Which source a path belongs to is :func:`collectors.sources.source_of`; every SQL statement and transaction is the
store's (:mod:`daemon.store`).
"""

from __future__ import annotations

from collectors.sources import LOGS
from daemon.ingest.parse import Parsed, parse_batch, parse_line
from daemon.ingest.passes import Ingester
from daemon.ingest.state import Clock, IngestStats, Sightings, system_clock

__all__ = [
    "LOGS", "Clock", "IngestStats", "Ingester", "Parsed", "Sightings", "parse_batch", "parse_line",
    "system_clock",
]
