"""The judgement cache: identical submissions reuse the stored verdict instead of being judged again."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from cuda_gym.build.files import read_regular, walk
from cuda_gym.errors import UnreadableFileError
from cuda_gym.judge.result import JudgeResult
from cuda_gym.paths import write_text_atomic

log = logging.getLogger(__name__)

MAX_HASHED_FILE = 64 * 2**20
"""Bytes of one submission file hashed into the key; a larger (or unreadable) file is hashed as its name."""


def tree_hash(root: Path) -> str:
    """A content hash of every file under ``root`` (``__pycache__`` too): links and special files by their kind,
    never followed; names by their bytes (a name that is not UTF-8 hashes like any other)."""
    h = hashlib.sha256()
    for entry in walk(root, skip_dirs=frozenset()):
        h.update(os.fsencode(entry.rel) + b"\0" + entry.kind.encode() + b"\0")
        if entry.kind != "file":
            continue
        try:
            h.update(hashlib.sha256(read_regular(root / entry.rel, MAX_HASHED_FILE)).digest())
        except (UnreadableFileError, OSError):
            h.update(b"unreadable")
    return h.hexdigest()


class JudgementCache:
    """Verdicts stored under a key of everything that decides them (``<root>/<key[:2]>/<key>.json``).

    Args:
        root: the cache folder.
        enabled: ``JudgeConfig.cache_judgements``; when false nothing is read or written.
    """

    def __init__(self, root: Path, enabled: bool) -> None:
        self.root = root
        self.enabled = enabled

    @staticmethod
    def key(parts: Iterable[str]) -> str:
        """The key of a judgement from its parts (task hash, submission kind and hash, device, config, mode)."""
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def path(self, key: str) -> Path:
        """Where the verdict of ``key`` is stored."""
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> JudgeResult | None:
        """The stored verdict, marked ``fingerprint["judgement"] = "cache"``, or ``None``."""
        if not self.enabled:
            return None
        path = self.path(key)
        try:
            result = JudgeResult.from_dict(json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("ignoring unreadable judgement cache entry %s: %s", path, exc)
            return None
        result.fingerprint["judgement"] = "cache"
        return result

    def put(self, key: str, result: JudgeResult) -> None:
        """Store a verdict (atomically)."""
        if not self.enabled:
            return
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, result.to_json(indent=None))
