"""``remove_tree``: folders that untrusted code wrote go whatever they hold, and nothing outside them."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_gym.trees import remove_tree


def _chain(root: Path, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
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
