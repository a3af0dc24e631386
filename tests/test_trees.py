"""``remove_tree``: folders that untrusted code wrote go whatever they hold, and nothing outside them;
``walk_tree``: what they hold is seen whole, or the walk says it cannot be."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_gym.errors import TreeUnwalkable
from cuda_gym.trees import MAX_DEPTH, remove_tree, walk_tree


def _chain(root: Path, depth: int, name: str = "d", files: int = 0) -> None:
    """``depth`` nested folders named ``name`` under ``root``, ``files`` files of 4 KiB in the last."""
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    for i in range(files):
        f = os.open(f"f{i}", os.O_CREAT | os.O_WRONLY, dir_fd=fd)
        os.write(f, b"x" * 4096)
        os.close(f)
    os.close(fd)


def test_a_chain_deeper_than_any_recursion_limit_is_removed(tmp_path: Path) -> None:
    root = tmp_path / "job"
    root.mkdir()
    _chain(root, 5000)  # paths longer than PATH_MAX too
    assert remove_tree(root) and not root.exists()


def test_links_are_removed_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("x")
    root = tmp_path / "job"
    root.mkdir()
    (root / "to_dir").symlink_to(outside)
    (root / "to_file").symlink_to(outside / "keep.txt")
    assert remove_tree(root) and not root.exists()
    assert (outside / "keep.txt").read_text() == "x"
    link = tmp_path / "link"
    link.symlink_to(outside)
    assert remove_tree(link) and not os.path.lexists(link) and (outside / "keep.txt").exists()


def test_locked_folders_and_missing_paths(tmp_path: Path) -> None:
    root = tmp_path / "job"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "a" / "b").chmod(0)
    (root / "a").chmod(0o500)
    assert remove_tree(root) and not root.exists()
    assert remove_tree(tmp_path / "never_there")


def test_a_walk_sees_what_lies_below_a_path_longer_than_path_max(tmp_path: Path) -> None:
    """20 folders of 250 characters (a 5 KiB path) hid 300 MiB and 5,000 files from a walk by path names: the
    sandbox's disk and entries limits never fired (red team 10, F1)."""
    _chain(tmp_path, 20, "n" * 250, files=30)
    seen = list(walk_tree(tmp_path))
    assert len(seen) == 50 and max(len(e.rel) for e in seen) > 5000
    assert sum(e.stat.st_size for e in seen if e.parts[-1].startswith("f")) == 30 * 4096
    (tmp_path / "link").symlink_to("/etc")
    assert [e.rel for e in walk_tree(tmp_path) if e.parts[0] == "link"] == ["link"]  # not followed


def test_a_tree_too_deep_to_walk_says_so(tmp_path: Path) -> None:
    _chain(tmp_path, MAX_DEPTH)
    assert len(list(walk_tree(tmp_path))) == MAX_DEPTH
    _chain(tmp_path / ("d/" * (MAX_DEPTH - 1)) / "d", 1)
    with pytest.raises(TreeUnwalkable, match=f"deeper than {MAX_DEPTH}"):
        list(walk_tree(tmp_path))
    assert list(walk_tree(tmp_path / "missing")) == [] and list(walk_tree(tmp_path / "d" / "d" / "f")) == []
