"""The file index: each file's row (created, modifications, deletion) kept as the passes see files come and go.

Spec 1.4: a file's ``created`` is its front-matter ``ts`` (Markdown) or when it was first seen; a change seen later is
a modification, except an append to a log (v2.3); a file gone is deleted, and its decision (a brief's, a finding's)
or report goes with it. A name a source is read under through a symlink has a row of its own (migration 009).
"""

from __future__ import annotations

from datetime import datetime

from collectors.statedir import FileInfo
from daemon.ingest.state import IngestState, IngestStats
from daemon.store import Fingerprint, IndexRow


class FileIndex(IngestState):
    """The file-index steps of a pass (see the module)."""

    def _index(self, info: FileInfo, fm_created: datetime | None, observed: bool, sha: str | None = None,
               fingerprint: Fingerprint | None = None) -> bool:
        """Update the index entry of a file, and the row of the name it was read under if that is another (a name
        through a symlink); True iff the name's row is new or changed. ``fingerprint``: the stat ``sha`` was taken
        after (a file read whole). Call inside a transaction."""
        if info.path == info.canonical:
            return self._index_row(info.path, None, info, fm_created, observed, sha, fingerprint)
        changed = self._index_row(info.path, info.canonical, info, fm_created, observed, sha, fingerprint)
        self._index_row(info.canonical, None, info, fm_created, observed, sha, fingerprint)
        return changed

    def _index_row(self, path: str, canonical: str | None, info: FileInfo, fm_created: datetime | None,
                   observed: bool, sha: str | None, fingerprint: Fingerprint | None) -> bool:
        """Update the row of ``path``: an index entry (``canonical`` None), or a name of the file ``canonical``."""
        row = self._row(path)
        seen_at = self.clock() if observed else info.mtime
        changed = row is None or row.deleted is not None or (row.mtime_ns, row.size, row.sha, row.canonical) != (
            info.mtime_ns, info.size, sha, canonical
        )
        if not changed:
            return False
        # Only an entry of the index has modifications, and a log none (spec 1.4, v2.3: an append is no modification).
        keeps_changes = canonical is None and path not in self._logs  # ingest_file notes a log before this
        if row is None or row.deleted is not None:
            created = fm_created or seen_at
            with self.store.transaction():
                self._put_file(IndexRow(path, created, None, info.mtime_ns, info.size, sha, fm_created is not None,
                                        canonical, fingerprint))
                # Batch semantics (spec 1.4): an mtime that differs from created is a modification.
                if keeps_changes and not observed and info.mtime != created:
                    self.store.add_file_change(path, info.mtime)
            return True
        created = fm_created or row.created
        with self.store.transaction():
            self._put_file(IndexRow(path, created, None, info.mtime_ns, info.size, sha, fm_created is not None,
                                    canonical, fingerprint))
            if keeps_changes:
                self.store.add_file_change(path, seen_at)
        return True

    def _forget_missing(self, seen: set[str]) -> IngestStats:
        stats = IngestStats()
        hides = self.unreadable.hides
        gone = [(path, canonical) for path, canonical in self.store.live_paths()
                if path not in seen and not hides(path)]
        for path, canonical in gone:
            stats.merge(self._delete(path))
            if canonical is None and self._links.resolve(path) != path:
                # Its directory is a symlink now: the path names another file, and is no entry of its own.
                with self.store.transaction():
                    self.store.remove_file(path)
                self._rows.pop(path, None)
        return stats

    def _delete(self, path: str) -> IngestStats:
        row = self._row(path)
        if row is None:
            return IngestStats()
        with self.store.transaction():
            self._put_file(IndexRow(path, row.created, self.clock(), row.mtime_ns, row.size, row.sha,
                                    row.front_matter, row.canonical))
            # Deleting a brief or finding removes its decision (spec 1.2); logs keep their records.
            self.store.remove_document(path)
            if self.source_of(path) == "evals":
                self.store.remove_eval(path)
        return IngestStats(deleted=1)
