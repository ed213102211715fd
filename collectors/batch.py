"""One-shot reading of a whole state directory into scorer records (batch mode, ``--state``).

The file index follows spec 1.4 for batch mode: ``created`` is a Markdown file's
front-matter ``ts`` when valid, else its mtime; ``modified`` is the mtime when it differs.
Each file is indexed once, under its canonical path; the symlinks inside the root come
with the scan, so a path through one names its target's entry (spec 1, v2.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from collectors.evals import parse_eval
from collectors.jsonl import parse_event, parse_label, strip_ending
from collectors.links import LinkMap, named_entries
from collectors.markdown import decode, front_matter_ts, parse_markdown
from collectors.records import EvalReport, Event, FileEntry, Label, Reject
from collectors.safeopen import read_regular
from collectors.sources import LOGS, Globs, source_of
from collectors.statedir import FileInfo, walk_tree


@dataclass
class BatchScan:
    """What a state directory holds, parsed."""

    events: list[Event] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    files: dict[str, FileEntry] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    evals: list[EvalReport] = field(default_factory=list)
    links: dict[str, str | None] = field(default_factory=dict)


def terminated_lines(data: bytes) -> list[bytes]:
    """The newline-terminated lines of a whole file's ``data`` (an unterminated last line is not read yet); the
    daemon tails a log from an offset instead (:func:`collectors.tail.line_batches`)."""
    lines = data.split(b"\n")
    lines.pop()  # either "" after the final "\n", or an unterminated line that must wait
    return lines


def index_entry(info: FileInfo, raw: bytes | None) -> FileEntry:
    """The batch-mode index entry of one file (``raw`` given for Markdown files), under its canonical path."""
    created = info.mtime
    if raw is not None and info.canonical.endswith(".md"):
        text = decode(raw, info.canonical)
        if isinstance(text, str):
            created = front_matter_ts(text) or created
    modified = (info.mtime,) if info.mtime != created else ()
    return FileEntry(info.canonical, created, modified)


class ScanSettings(Protocol):
    """What a scan reads of the configuration (daemon.config.Config provides it)."""

    @property
    def globs(self) -> Globs:
        """Where each source lives."""

    @property
    def github_repo(self) -> str:
        """OWNER/REPO that a bare ``Issue #N`` refers to."""


def scan_state(root: Path, config: ScanSettings) -> BatchScan:
    """Parse every source under ``root`` in read order (under every name a source glob matches) and index every
    file once."""
    scan = BatchScan()
    globs = config.globs
    repo = config.github_repo
    tree = walk_tree(root)
    scan.links = tree.links
    for info in named_entries(tree.files, LinkMap(tree.links), globs.all()):
        own = info.path == info.canonical
        is_md = own and info.path.endswith(".md")
        source = source_of(globs, info.path)
        try:
            # Never a FIFO or device swapped in since the walk: not read, not waited on.
            raw = read_regular(info.abspath) if is_md or source is not None else None
        except OSError:
            raw = None
        if own:
            scan.files[info.path] = index_entry(info, raw)
        if raw is None or source is None or source == "reviews":  # honestyd's review queue: no scoring input
            continue
        if source in LOGS:
            is_label = source == "labels"
            for number, line in enumerate(terminated_lines(raw), start=1):
                line = strip_ending(line)
                rec = parse_label(line, info.path, number) if is_label else parse_event(line, info.path, number, repo)
                if isinstance(rec, Reject):
                    scan.rejects.append(rec)
                elif isinstance(rec, Label):
                    scan.labels.append(rec)
                else:
                    scan.events.append(rec)
        elif source in ("briefs", "findings"):
            md = parse_markdown(raw, info.path, "brief" if source == "briefs" else "finding", info.mtime, repo)
            (scan.rejects if isinstance(md, Reject) else scan.events).append(md)  # type: ignore[arg-type]
        else:
            report = parse_eval(raw, info.path)
            (scan.rejects if isinstance(report, Reject) else scan.evals).append(report)  # type: ignore[arg-type]
    return scan
