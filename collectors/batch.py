"""One-shot reading of a whole state directory into scorer records (batch mode, ``--state``).

The file index follows spec 1.4 for batch mode: ``created`` is a Markdown file's
front-matter ``ts`` when valid, else its mtime; ``modified`` is the mtime when it differs.
Each file is indexed once, under its canonical path; the symlinks inside the root come
with the scan, so a path through one names its target's entry (spec 1, v2.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from collectors.evals import parse_eval
from collectors.jsonl import parse_event, parse_label, strip_ending
from collectors.links import LinkMap, named_entries
from collectors.markdown import decode, front_matter_ts, parse_markdown
from collectors.records import EvalReport, Event, FileEntry, Label, Reject
from collectors.safeopen import read_regular
from collectors.statedir import FileInfo, glob_match, walk_tree
from daemon.config import Config


@dataclass
class BatchScan:
    """What a state directory holds, parsed."""

    events: list[Event] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)
    files: dict[str, FileEntry] = field(default_factory=dict)
    rejects: list[Reject] = field(default_factory=list)
    evals: list[EvalReport] = field(default_factory=list)
    links: dict[str, str | None] = field(default_factory=dict)


def complete_lines(data: bytes) -> list[bytes]:
    """The newline-terminated lines of ``data`` (an unterminated last line is not read yet)."""
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


def scan_state(root: Path, config: Config) -> BatchScan:
    """Parse every source under ``root`` in read order (under every name a source glob matches) and index every
    file once."""
    scan = BatchScan()
    globs = config.globs
    repo = config.github_repo
    tree = walk_tree(root)
    scan.links = tree.links
    all_globs = (globs.heartbeats, globs.labels, globs.briefs, globs.findings, globs.evals)
    for info in named_entries(tree.files, LinkMap(tree.links), all_globs):
        own = info.path == info.canonical
        is_md = own and info.path.endswith(".md")
        try:
            # Never a FIFO or device swapped in since the walk: not read, not waited on.
            raw = read_regular(info.abspath) if is_md or _is_source(info.path, config) else None
        except OSError:
            raw = None
        if own:
            scan.files[info.path] = index_entry(info, raw)
        if raw is None:
            continue
        if glob_match(globs.heartbeats, info.path) or glob_match(globs.labels, info.path):
            is_label = glob_match(globs.labels, info.path)
            for number, line in enumerate(complete_lines(raw), start=1):
                line = strip_ending(line)
                rec = parse_label(line, info.path, number) if is_label else parse_event(line, info.path, number, repo)
                if isinstance(rec, Reject):
                    scan.rejects.append(rec)
                elif isinstance(rec, Label):
                    scan.labels.append(rec)
                else:
                    scan.events.append(rec)
        elif glob_match(globs.briefs, info.path) or glob_match(globs.findings, info.path):
            kind = "brief" if glob_match(globs.briefs, info.path) else "finding"
            md = parse_markdown(raw, info.path, kind, info.mtime, repo)
            (scan.rejects if isinstance(md, Reject) else scan.events).append(md)  # type: ignore[arg-type]
        elif glob_match(globs.evals, info.path):
            report = parse_eval(raw, info.path)
            (scan.rejects if isinstance(report, Reject) else scan.evals).append(report)  # type: ignore[arg-type]
    return scan


def _is_source(path: str, config: Config) -> bool:
    g = config.globs
    return any(glob_match(p, path) for p in (g.heartbeats, g.labels, g.briefs, g.findings, g.evals))
