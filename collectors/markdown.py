"""Briefs and findings: Markdown with optional front matter (spec 1.2)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from collectors import citations as cit
from collectors.jsonl import snippet
from collectors.records import Event, Reject
from collectors.rfc3339 import TimestampError, parse_ts

FRONT_MATTER_KEYS = ("agent", "ts", "thread", "prompt", "subject")


class FrontMatter(NamedTuple):
    """The ``key: value`` pairs of the front matter (last one wins) and the body after it."""

    fields: dict[str, str]
    body: str


def split_front_matter(text: str) -> FrontMatter:
    """Split ``---``-fenced front matter from the body; no opening or closing fence → no front matter."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return FrontMatter({}, text)
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") == "---":
            fields: dict[str, str] = {}
            for entry in lines[1:i]:
                key, sep, value = entry.partition(":")
                if sep:
                    fields[key.strip()] = value.strip()
            return FrontMatter(fields, "".join(lines[i + 1 :]))
    return FrontMatter({}, text)


def agent_from_name(path: str) -> str:
    """File name up to the first ``-`` or ``_``; the whole name without ``.md`` if it has neither."""
    name = path.rsplit("/", 1)[-1]
    name = name.removesuffix(".md")
    cut = min((i for i in (name.find("-"), name.find("_")) if i >= 0), default=len(name))
    return name[:cut]


def decode(raw: bytes, path: str) -> str | Reject:
    """UTF-8 text of a Markdown file, or a Reject."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Reject(path, None, "not_utf8", snippet(raw))


def front_matter_ts(text: str) -> datetime | None:
    """The valid front-matter ``ts`` of any Markdown file, for the file index's ``created``."""
    value = split_front_matter(text).fields.get("ts")
    if value is None:
        return None
    try:
        return parse_ts(value)
    except TimestampError:
        return None


def parse_markdown(raw: bytes, path: str, kind: str, mtime: datetime, repo: str) -> Event | Reject:
    """One brief or finding → one decision (id = its relative path), or a Reject for a bad ``ts``."""
    text = decode(raw, path)
    if isinstance(text, Reject):
        return text
    fm = split_front_matter(text)
    ts = mtime
    if "ts" in fm.fields:
        try:
            ts = parse_ts(fm.fields["ts"])
        except TimestampError:
            return Reject(path, None, "bad_ts", fm.fields["ts"][:200])
    subject = tuple(s.strip() for s in fm.fields.get("subject", "").split(",") if s.strip())
    return Event(
        id=path,
        ts=ts,
        agent=fm.fields.get("agent") or agent_from_name(path),
        kind=kind,
        path=path,
        line=None,
        thread=fm.fields.get("thread"),
        text=fm.body,
        citations=cit.extract(fm.body, (), repo),
        prompt=fm.fields.get("prompt") or None,
        subject=subject,
    )
