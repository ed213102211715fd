"""The methodology changelog of spec section 5: dated Markdown entries, rendered purely, appended atomically.

* :mod:`daemon.changelog.entries` — the entries (methodology record, daily digest), pure; the score drops and
  closes are the review queue's (daemon/reviews/views.py);
* :mod:`daemon.changelog.methodology` — the methodology fingerprint, its full listing and its diff;
* :mod:`daemon.changelog.markdown` — escaping of untrusted text and the number formats entries use;
* :mod:`daemon.changelog.writer` — the file: atomic appends under the state root, each key written once.

The names callers use (``from daemon import changelog``; ``changelog.Appender``…) are re-exported here.
"""

from daemon.changelog.entries import Entry, audit_path, digest_entry, methodology_entries
from daemon.changelog.markdown import md_code, md_text
from daemon.changelog.methodology import last_methodology_fingerprint, methodology_fingerprint, weight_changes
from daemon.changelog.writer import INTRO, TITLE, Appender, append_entries, changelog_text

__all__ = [
    "INTRO",
    "TITLE",
    "Appender",
    "Entry",
    "append_entries",
    "audit_path",
    "changelog_text",
    "digest_entry",
    "last_methodology_fingerprint",
    "md_code",
    "md_text",
    "methodology_entries",
    "methodology_fingerprint",
    "weight_changes",
]
