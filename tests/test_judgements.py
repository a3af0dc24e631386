"""The judgement cache: keys from content that never follow the agent's links; stored verdicts."""

from __future__ import annotations

import os
from pathlib import Path

from cuda_gym.judge.judgements import JudgementCache, tree_hash
from cuda_gym.judge.result import JudgeResult


def test_tree_hash_follows_no_link_and_opens_no_special_file(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (root / "model_new.py").write_text("x = 1\n")
    host = tmp_path / "host_secret.txt"
    host.write_text("secret one")
    (root / "kernels" / "x.h").symlink_to(host)
    os.mkfifo(root / "kernels" / "pipe.h")  # reading it would block forever
    first = tree_hash(root)
    host.write_text("secret two: a different host file behind the same link")
    assert tree_hash(root) == first  # the link's target is never read
    (root / "model_new.py").write_text("x = 2\n")
    assert tree_hash(root) != first  # the submission's own files are


def test_judgement_cache_round_trip_and_switch(tmp_path: Path) -> None:
    result = JudgeResult(task_id="builtin/x", mode="verify", device="cpu", compiled=True)
    on, off = JudgementCache(tmp_path / "on", True), JudgementCache(tmp_path / "off", False)
    key = JudgementCache.key(["a", "b"])
    assert key != JudgementCache.key(["a", "c"]) and on.get(key) is None
    on.put(key, result)
    off.put(key, result)
    got = on.get(key)
    assert got is not None and got.task_id == "builtin/x" and got.fingerprint["judgement"] == "cache"
    assert off.get(key) is None and not (tmp_path / "off").exists()
