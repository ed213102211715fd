"""honestyd's performance harness: ``python -m bench [PART ...] [--quick]``.

It generates its own data with ``honestyd simulate`` (fixed seeds, cached under ``bench/.data/``),
measures every part against the issue's targets, interleaves each baseline with its subject,
and writes ``bench/results.json`` and ``bench/scaling.png``. See docs/performance.md.
"""

from __future__ import annotations

from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / ".data"

#: Every part, in the order the table lists them.
PARTS: tuple[str, ...] = ("ingest", "scaling", "rescore", "latency", "scrape", "memory", "verify", "audits",
                          "scale")
