"""The measured parts, in groups that share data and processes.

* :mod:`bench.parts.batch` — ingest, scaling and rescore, one interleaved rotation;
* :mod:`bench.parts.daemon` — latency and memory, one running daemon;
* :mod:`bench.parts.scrape` and :mod:`bench.parts.verify` — on their own.
"""

from __future__ import annotations
