"""Symlinks inside the state root: which indexed file a path names (spec 1, v2.3).

The file index holds each real file once, under its canonical path: relative to the resolved root, with no symlink
among its components. The walk also reports every symlink it meets inside the root, as a :class:`LinkMap` from the
link's own canonical location to the canonical path it resolves to, or None when it leaves the root, dangles, loops,
or lands on a name the project ignores (one starting with ``.``). A cited path stays lexical as a *target* (consistency
compares (type, target) sets; checks are stored by target): it is resolved through the map only when the index is
asked about it, so ``latest/runbook.md`` with ``latest → docs`` is the file ``docs/runbook.md``, with its entry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from collectors.statedir import Files, glob_regex

#: A link's canonical location → the canonical path it resolves to ("" for the root itself), or None.
Links = Mapping[str, str | None]


def depth(path: str) -> int:
    """How many components a relative path (or a glob: its ``*`` never crosses ``/``) has; 0 for the root."""
    return path.count("/") + 1 if path else 0


class LinkMap:
    """The symlinks inside the root, and the two questions asked of them: what a path names, and by which names a
    canonical path is reached. Immutable; cheap to ask when there are no links (the usual state directory)."""

    __slots__ = ("_by_target", "links")

    def __init__(self, links: Links | None = None) -> None:
        self.links: dict[str, str | None] = dict(sorted((links or {}).items()))
        by_target: dict[str, list[str]] = {}
        for location, target in self.links.items():
            if target is not None:
                by_target.setdefault(target, []).append(location)
        self._by_target = by_target

    def __bool__(self) -> bool:
        return bool(self.links)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinkMap) and self.links == other.links

    def __hash__(self) -> int:
        return hash(tuple(self.links.items()))

    def __repr__(self) -> str:
        return f"LinkMap({self.links!r})"

    def __getstate__(self) -> dict[str, str | None]:
        return self.links

    def __setstate__(self, state: dict[str, str | None]) -> None:
        self.__init__(state)  # type: ignore[misc]

    def resolve(self, path: str) -> str | None:
        """The canonical path a normalised relative ``path`` names, or None when it goes through a link that leaves
        the root (or dangles). Each component is looked up once: the map's targets are resolved already, so a loop
        (``loop → .``) costs one step per component and never more."""
        if not self.links:
            return path
        links = self.links
        current = ""
        for part in path.split("/"):
            step = f"{current}/{part}" if current else part
            if step in links:
                target = links[step]
                if target is None:
                    return None
                step = target
            current = step
        return current

    def names(self, path: str, components: int) -> list[str]:
        """Every path of ``components`` components that names the canonical ``path`` (itself among them when it
        has that many), sorted. Finite even with a link to an ancestor: each link taken costs a component."""
        if not self._by_target:
            return [path] if depth(path) == components else []
        return sorted(set(self._names(path, components)))

    def _names(self, path: str, components: int) -> Iterator[str]:
        parts = path.split("/") if path else []
        if len(parts) == components:
            yield path
        for i in range(len(parts) + 1):
            locations = self._by_target.get("/".join(parts[:i]))
            if not locations:
                continue
            rest = parts[i:]
            left = components - len(rest) - 1  # what the name of the link's directory may take
            if left < 0:
                continue
            for location in locations:
                parent, _, base = location.rpartition("/")
                for prefix in self._names(parent, left):
                    yield "/".join([*([prefix] if prefix else []), base, *rest])

    def matches(self, glob: str, path: str) -> bool:
        """True iff some name of the canonical ``path`` matches ``glob`` (a glob's ``*`` does not cross ``/``)."""
        rx = glob_regex(glob)
        if not self._by_target:
            return rx.fullmatch(path) is not None
        return any(rx.fullmatch(name) for name in self.names(path, depth(glob)))


#: The map of a root without symlinks (shared: it is immutable).
NO_LINKS = LinkMap()


def other_names(links: LinkMap, path: str, globs: Sequence[str]) -> list[str]:
    """The names of the canonical ``path`` other than itself that one of ``globs`` matches, sorted."""
    if not links:
        return []
    found: set[str] = set()
    for n in sorted({depth(g) for g in globs}):
        found.update(name for name in links.names(path, n)
                     if name != path and any(glob_regex(g).fullmatch(name) for g in globs))
    return sorted(found)


def named_entries(files: Files, links: LinkMap, globs: Sequence[str]) -> Files:
    """What a pass reads, in read order: every canonical file, and every further name of one that a source glob
    matches (a log ``heartbeats/b.jsonl → ../data/x.jsonl`` is still a heartbeat log; ``briefs → drafts`` makes
    ``drafts/x.md`` a brief as ``briefs/x.md``). Such a name keeps its file's ``canonical`` and ``abspath``: it is
    read through the canonical path, which no symlink can re-point out of the root between the walk and the read.
    """
    if not links:
        return files
    named = [(path, i) for i, path in enumerate(files.paths)]
    for i in range(len(files)):
        named.extend((name, i) for name in other_names(links, files.canonical(i), globs))
    named.sort()
    return files.taken([i for _, i in named], [name for name, _ in named])
