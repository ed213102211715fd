"""Markdown files (briefs, findings) and benchmark reports: read whole, and replaced in the store when they change.

A file whose stat matches the fingerprint its index row recorded is not read at all (daemon/ingest/fingerprint.py);
one whose content hash, mtime and name are those stored is not parsed again (its new fingerprint is recorded); a
changed one has its decision (or report, or reject) replaced in the same transaction as its index row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from collectors.evals import parse_eval
from collectors.markdown import decode, front_matter_ts, parse_markdown
from collectors.records import Event, Label, Reject
from collectors.safeopen import RefusedFile
from collectors.statedir import FileInfo, Files
from daemon.ingest.fingerprint import fingerprint_of, stat_key_at, stored_key, trusted, unchanged
from daemon.ingest.index import FileIndex
from daemon.ingest.state import IngestStats
from daemon.skips import vanished
from daemon.store import Fingerprint


class Documents(FileIndex):
    """The steps of a pass for the files parsed whole (see the module)."""

    def _whole_file(self, info: FileInfo, source: str | None, observed: bool) -> IngestStats:
        stats = IngestStats()
        row = self._row(info.path)
        canonical = None if info.path == info.canonical else info.canonical
        if self._unchanged is None and unchanged(row, info, canonical):  # a scan has told its unchanged files apart
            self.unreadable.read(info.path)
            return stats
        try:
            raw = self.read(info.abspath)  # a FIFO or device swapped in since the walk is never read or waited on
        except RefusedFile:
            return stats  # not a regular file any more: the next pass sees what it is now
        except OSError as exc:
            if not vanished(exc):
                self.unreadable.failed(info.path, exc)
            return stats
        self.unreadable.read(info.path)
        sha = hashlib.sha256(raw).hexdigest()
        fingerprint = fingerprint_of(info, self._stat_ns)
        if row is not None and row.deleted is None and row.sha == sha and row.mtime_ns == info.mtime_ns and \
                row.canonical == canonical:
            if row.fingerprint is None or row.fingerprint[:3] != fingerprint[:3] or trusted(fingerprint):
                self._note_fingerprint(info.path, sha, info, fingerprint)  # so that the next pass need not read it
            return stats
        fm_created = None
        if info.path.endswith(".md"):
            text = decode(raw, info.path)
            fm_created = front_matter_ts(text) if isinstance(text, str) else None
        with self.store.transaction():
            self._index(info, fm_created, observed, sha, fingerprint)
            if source in ("briefs", "findings"):
                self.store.remove_document(info.path)
                kind = "brief" if source == "briefs" else "finding"
                parsed = parse_markdown(raw, info.path, kind, info.mtime, self.config.github_repo)
                self._record(parsed, source, 0, stats)
            elif source == "evals":
                self.store.remove_document(info.path)  # a fixed report drops its earlier reject
                report = parse_eval(raw, info.path)
                if isinstance(report, Reject):
                    self.store.remove_eval(info.path)
                    self._reject(report, source, 0, stats)
                else:
                    self.store.put_eval(report, sha)
                    self._count(stats, source, 1)
        return stats

    def _unchanged_paths(self, files: Files, read_whole: Iterable[int]) -> set[str]:
        """The paths of the scan's ``files`` at ``read_whole`` (in path order) that their rows say are unchanged: one
        read of the index in path order beside them, instead of a query per file."""
        found: set[str] = set()
        rows = self.store.stats_in_order()
        row = next(rows, None)
        for i in read_whole:
            path = files.paths[i]
            while row is not None and row[0] < path:
                row = next(rows, None)
            if row is not None and row[0] == path:
                canonical = files.canonical(i)
                if stored_key(row) == stat_key_at(files, i, None if path == canonical else canonical):
                    found.add(path)
        for _ in rows:  # read to the end: no statement left open
            pass
        return found

    def _note_fingerprint(self, path: str, sha: str, info: FileInfo, fingerprint: Fingerprint) -> None:
        """Record the fingerprint of an unchanged file read (at the scan's end, or now outside a scan)."""
        noted = (path, sha, info.mtime_ns, info.size, fingerprint)
        if self._fingerprints is not None:
            self._fingerprints.append(noted)
        else:
            with self.store.transaction():
                self.store.put_fingerprints([noted])

    def _record(self, parsed: Event | Label | Reject, source: str, generation: int, stats: IngestStats) -> None:
        if isinstance(parsed, Reject):
            self._reject(parsed, source, generation, stats)
        elif isinstance(parsed, Label):
            self._count(stats, source, self.store.add_labels([parsed]))
        else:
            self._count(stats, source, self.store.add_events([parsed]))
