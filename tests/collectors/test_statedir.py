"""The walk of the state root held as columns (collectors/statedir.py): the files a walk by FileInfo would find."""

from __future__ import annotations

import os
from array import array
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from collectors import walkahead
from collectors.statedir import FileInfo, Files, Tree, walk, walk_tree

#: Past the year 2262: more nanoseconds than a signed 64-bit array holds.
FAR_FUTURE_NS = 2**63 + 10**12


def _reference_walk(root: Path) -> list[FileInfo]:
    """Every regular file under ``root`` (none under a ``.`` name, no symlink followed), by os.walk, in path order."""
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d))]
        for name in names:
            full = os.path.join(folder, name)
            if name.startswith(".") or os.path.islink(full):
                continue
            st_ = os.lstat(full)
            rel = os.path.relpath(full, root)
            out.append(FileInfo(rel, full, st_.st_mtime_ns, st_.st_size, st_.st_dev, st_.st_ino, rel,
                                st_.st_ctime_ns))
    return sorted(out, key=lambda f: f.path)


def _tree(root: Path) -> None:
    # Folders whose names order otherwise than their paths do ("a" < "a-b", but "a-b/…" < "a/…"), a symlink, a
    # hidden file and folder, an empty folder.
    for rel in ("a/x.md", "a/y/z.jsonl", "a-b/y.md", "a0", "b.md", ".hidden/x.md", "a/.dot.md", "big/" + "n" * 200):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel * 3)
    (root / "empty").mkdir()
    (root / "a" / "link.md").symlink_to("x.md")


def test_the_walk_finds_each_regular_file_once_in_path_order_with_its_stat(tmp_path: Path) -> None:
    _tree(tmp_path)
    tree = walk_tree(tmp_path)
    expected = _reference_walk(tmp_path)
    assert [f.path for f in expected] == ["a-b/y.md", "a/x.md", "a/y/z.jsonl", "a0", "b.md", "big/" + "n" * 200]
    assert list(tree.files) == expected and tree.files == expected and walk(tmp_path) == expected
    assert tree.links == {"a/link.md": "a/x.md"}
    assert [tree.files[i] for i in range(len(expected))] == expected and tree.files[1:3] == expected[1:3]
    assert tree.files.stats(1) == (expected[1].mtime_ns, expected[1].size, expected[1].dev, expected[1].ino,
                                   expected[1].ctime_ns)


def _stat(mtime_ns: int, size: int, dev: int, ino: int, ctime_ns: int) -> os.stat_result:
    return os.stat_result((0o100644, ino, dev, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime_ns, ctime_ns))


def test_a_time_past_what_an_array_holds_is_kept_exactly_here_and_across_the_childs_pipe(tmp_path: Path) -> None:
    files = Files.empty(str(tmp_path))
    files.append("a.md", _stat(5, 10, 1, 2, 6))
    files.append("b.md", _stat(FAR_FUTURE_NS, 11, 1, 3, 7))  # mtime's column becomes a list, the others stay arrays
    files.append("c.md", _stat(8, 12, 2**64 - 1, 2**64 - 2, -9))
    assert isinstance(files.columns[0], list) and all(isinstance(c, array) for c in files.columns[1:])
    assert [f.mtime_ns for f in files] == [5, FAR_FUTURE_NS, 8] and files.stats(2) == (8, 12, 2**64 - 1, 2**64 - 2, -9)
    tree = Tree(files, {"l.md": "a.md"})
    errors = [("x", 13, "Permission denied")]
    back, back_errors = walkahead.decoded(walkahead.encoded(tree, errors), tmp_path)
    assert back.files == list(files) and back.links == tree.links and back_errors == errors
    assert isinstance(back.files.columns[0], list) and back.files.columns[1:] == files.columns[1:]


def test_the_childs_answer_is_its_walk(tmp_path: Path) -> None:
    _tree(tmp_path)
    data, tree = walkahead.answer(tmp_path)
    back, errors = walkahead.decoded(data, tmp_path)
    assert back.files == _reference_walk(tmp_path) and back.links == tree.links and errors == []


_STAT = st.integers(min_value=0, max_value=2**64 - 1)
_PATH = st.text("abc/", min_size=1, max_size=6).filter(lambda p: p[0] != "/")  # relative, as a walk's


@given(st.lists(st.tuples(_PATH, _STAT, _STAT), unique_by=lambda t: t[0],
                max_size=20))
def test_files_taken_and_sorted_are_the_fileinfos_reordered(rows: list[tuple[str, int, int]]) -> None:
    files = Files.empty("/root")
    for path, big, small in rows:
        files.append(path, _stat(big, big % 2**63, small, small, small % 2**63))
    infos = list(files)
    assert [f.abspath for f in infos] == [os.path.join("/root", p) for p, _, _ in rows]
    assert files.sorted() == sorted(infos, key=lambda f: f.path)
    order = list(range(len(rows)))[::-1]
    renamed = [f"n{i}" for i in order]
    taken = files.taken(order, renamed)
    assert [(f.path, f.canonical, f.abspath, f.mtime_ns) for f in taken] == \
        [(f"n{i}", infos[i].path, infos[i].abspath, infos[i].mtime_ns) for i in order]
